// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
// ddscope's in-kernel capture filter (docs/online.md, "In-kernel filter").
//
// A socket filter attached to the agent's capture socket (SO_ATTACH_BPF on
// libpcap's packet socket). For every frame it returns how many bytes user
// space gets: the whole frame, a prefix, or nothing. It never changes what
// the analyses compute:
//   - frames that are not IPv4 fragments of UDP datagrams pass whole;
//   - discovery (even UDP destination port, RTPS's default mapping) and
//     anything that is not RTPS pass whole, all fragments of it;
//   - of a fragmented RTPS datagram it walks the submessage headers across
//     the fragments (their positions are kept per datagram in FRAGS).
//     Every fragment up to the one holding the last submessage header passes
//     whole, so user space reads the datagram's headers as today; after the
//     last header, only the bytes the analyses read pass (the fixed fields of
//     a DATA / DATA_FRAG, 64 bytes), and a fragment with nothing needed is
//     left out of the capture: its Ethernet + IP headers go to the DROPPED
//     ring buffer instead, so user space still counts it (fragments per
//     sample, wire bytes) and completes the datagram by declared lengths.
//   - the first fragment seen of a datagram and the one that completes it
//     always pass (at least their headers): the first and last fragment
//     times of every datagram stay the capture's own.
// Whenever the program cannot follow a datagram (state table full, a header
// split across two fragments, IP options, a fragment of a datagram whose
// first fragment it did not see), it passes frames whole and counts why.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define HDRS_MAX 40     /* Ethernet + one VLAN tag + IPv4 without options = 38 */
#define KEEP_DATA 64    /* bytes of a DATA / DATA_FRAG submessage the analyses read */
#define WALK_MAX 8      /* submessage headers examined per fragment */

struct frag_key {
	__u32 src;
	__u32 dst;
	__u32 id;
};

struct frag_state {
	__u64 seen_ns;   /* last fragment (monotonic clock, for the record) */
	__u32 total;     /* UDP datagram length = IP payload length of the datagram */
	__u32 covered;   /* payload bytes of the fragments seen so far */
	__u32 next;      /* offset of the next submessage header in the IP payload */
	__u32 need_end;  /* bytes needed up to here (a header's fixed fields) */
	__u32 whole;     /* pass every fragment whole */
};

/* Datagrams being followed; LRU: a datagram pushed out has its later
 * fragments passed whole (counted as STAT_NO_STATE). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct frag_key);
	__type(value, struct frag_state);
} FRAGS SEC(".maps");

struct dropped {
	__u32 orig_len;  /* the frame's length on the wire */
	__u32 hdr_len;   /* bytes of data[] that hold the frame's headers */
	__u8 data[HDRS_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} DROPPED SEC(".maps");

enum {
	STAT_FRAMES,        /* frames seen by the program */
	STAT_LEFT_OUT,      /* fragments left out (reported through DROPPED) */
	STAT_BYTES_SAVED,   /* frame bytes not copied to user space */
	STAT_RING_FULL,     /* fragments passed because DROPPED was full */
	STAT_NO_STATE,      /* fragments of datagrams not followed (first unseen or pushed out), passed whole */
	STAT_UNFOLLOWED,    /* datagrams given up (header across fragments, IP options, bad header), passed whole */
	STAT_COMPLETED,     /* fragmented RTPS datagrams followed to their last byte */
	STAT_RECORDS,       /* (unused: user space counts the records it reads) */
	STAT_PASSED,        /* records mode: frames passed whole to the socket (orders records and frames) */
	STAT_NO_TSTAMP,     /* records mode: frames passed whole for want of a kernel timestamp */
	STAT_N,
};

/* Memory-mapped by user space, which reads it without system calls (the
 * agent's system-call filter forbids bpf() once capture runs). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_N);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} STATS SEC(".maps");

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&STATS, &which);
	if (v)
		__sync_fetch_and_add(v, n);
}

/* The reassembly key of an IPv4 header: source, destination, identification. */
static __always_inline struct frag_key frag_key_of(const __u8 *ip)
{
	struct frag_key key = {};
	__builtin_memcpy(&key.src, &ip[12], 4);
	__builtin_memcpy(&key.dst, &ip[16], 4);
	key.id = ((__u32)ip[4] << 8) | ip[5];
	return key;
}

/* A fragment other than the first of a datagram with no entry (reordered,
 * or the entry was pushed out): the datagram is marked to pass whole, all of
 * it, and counted. `seen_ns` 0: the records program reads no clock. */
static __always_inline void mark_unfollowed(struct frag_key *key, __u32 plen, __u32 more, __u32 end, __u64 seen_ns)
{
	struct frag_state w = {};
	w.whole = 1;
	w.covered = plen;
	w.total = more ? 0 : end;
	w.seen_ns = seen_ns;
	bpf_map_update_elem(&FRAGS, key, &w, BPF_ANY);
	count(STAT_NO_STATE, 1);
}

#define SUBMSG_DATA 0x15
#define SUBMSG_DATA_FRAG 0x16

/* Walks the submessage headers that start inside [off, end) of the IP
 * payload. Returns the end of the bytes this fragment must keep (IP payload
 * offset), 0 if none; gives up on the datagram (st->whole) when it cannot
 * follow it. */
static __always_inline __u32 walk(struct __sk_buff *skb, __u32 l4, struct frag_state *st, __u32 off, __u32 end)
{
	__u32 keep = 0;
	if (st->need_end > off)
		keep = st->need_end < end ? st->need_end : end;
	for (int i = 0; i < WALK_MAX; i++) {
		__u32 at = st->next;
		if (at >= st->total || at >= end)
			break;
		if (at + 4 > end) {
			/* A submessage header split across two fragments. */
			st->whole = 1;
			count(STAT_UNFOLLOWED, 1);
			return end;
		}
		__u8 h[4];
		if (bpf_skb_load_bytes(skb, l4 + (at - off), h, 4) < 0) {
			st->whole = 1;
			count(STAT_UNFOLLOWED, 1);
			return end;
		}
		__u32 octets = (h[1] & 1) ? (__u32)h[2] | ((__u32)h[3] << 8) : ((__u32)h[2] << 8) | h[3];
		__u32 len = octets ? 4 + octets : st->total - at; /* 0: up to the end of the message */
		__u32 need = len;
		if ((h[0] == SUBMSG_DATA || h[0] == SUBMSG_DATA_FRAG) && !(h[1] & 2) && need > KEEP_DATA)
			need = KEEP_DATA; /* no inline QoS: header, fixed fields and the payload's first bytes */
		st->need_end = at + need;
		st->next = at + len;
		keep = st->need_end < end ? st->need_end : end;
	}
	if (st->next < st->total && st->next >= end) {
		/* Another header follows in a later fragment: user space reads
		 * the datagram's bytes contiguously, so this one passes whole. */
		return end;
	}
	if (st->next < end && st->next < st->total) {
		/* More headers in this fragment than one walk examines. */
		st->whole = 1;
		count(STAT_UNFOLLOWED, 1);
		return end;
	}
	return keep;
}

SEC("socket")
int ddscope_capture(struct __sk_buff *skb)
{
	__u32 whole = skb->len;
	count(STAT_FRAMES, 1);

	__u32 l3 = ETH_HLEN;
	__be16 proto;
	if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
		return whole;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		l3 += 4;
		if (bpf_skb_load_bytes(skb, 16, &proto, 2) < 0)
			return whole;
	}
	if (proto != bpf_htons(ETH_P_IP))
		return whole;
	__u8 ip[20];
	if (bpf_skb_load_bytes(skb, l3, ip, 20) < 0)
		return whole;
	if (ip[9] != 17 /* UDP */)
		return whole;
	__u16 frag = ((__u16)ip[6] << 8) | ip[7];
	__u32 more = frag & 0x2000;
	__u32 off = (__u32)(frag & 0x1fff) * 8;
	if (!more && off == 0)
		return whole; /* not fragmented */
	if ((ip[0] & 0x0f) != 5) {
		count(STAT_UNFOLLOWED, 1);
		return whole; /* IP options: not followed */
	}
	__u32 tot = ((__u32)ip[2] << 8) | ip[3];
	if (tot < 20 || l3 + tot > skb->len)
		return whole;
	__u32 plen = tot - 20;
	__u32 l4 = l3 + 20;
	__u32 end = off + plen;

	struct frag_key key = frag_key_of(ip);

	struct frag_state *st = bpf_map_lookup_elem(&FRAGS, &key);
	if (!st) {
		if (off != 0) {
			mark_unfollowed(&key, plen, more, end, bpf_ktime_get_ns());
			return whole;
		}
		/* First fragment: UDP header and RTPS header. */
		struct frag_state fresh = {};
		__u8 u[12];
		if (plen < 12 || bpf_skb_load_bytes(skb, l4, u, 12) < 0)
			return whole;
		__u32 dport = ((__u32)u[2] << 8) | u[3];
		fresh.total = ((__u32)u[4] << 8) | u[5];
		fresh.covered = plen;
		fresh.next = 8 + 20; /* UDP header + RTPS header */
		fresh.need_end = 8 + 20;
		fresh.seen_ns = bpf_ktime_get_ns();
		if ((dport & 1) == 0 || u[8] != 'R' || u[9] != 'T' || u[10] != 'P' || u[11] != 'S' || fresh.total < 28)
			fresh.whole = 1; /* discovery, or not RTPS: all of it */
		__u32 keep = fresh.whole ? plen : walk(skb, l4, &fresh, 0, end);
		if (fresh.covered >= fresh.total && fresh.total) {
			count(STAT_COMPLETED, 1);
			return whole;
		}
		if (bpf_map_update_elem(&FRAGS, &key, &fresh, BPF_ANY) < 0) {
			count(STAT_NO_STATE, 1);
			return whole;
		}
		if (fresh.whole || keep >= plen)
			return whole;
		count(STAT_BYTES_SAVED, plen - keep);
		return l4 + keep;
	}

	st->seen_ns = bpf_ktime_get_ns();
	st->covered += plen;
	if (!more)
		st->total = end;
	if (st->whole) {
		if (st->total && st->covered >= st->total) {
			bpf_map_delete_elem(&FRAGS, &key);
			count(STAT_COMPLETED, 1);
		}
		return whole;
	}
	__u32 keep = walk(skb, l4, st, off, end);
	if (st->whole) {
		if (st->covered >= st->total)
			bpf_map_delete_elem(&FRAGS, &key);
		return whole;
	}
	if (st->covered >= st->total) {
		/* The fragment that completes the datagram: its time is the
		 * datagram's last fragment time. */
		bpf_map_delete_elem(&FRAGS, &key);
		count(STAT_COMPLETED, 1);
		__u32 k = keep > off ? keep - off : 0;
		if (k >= plen)
			return whole;
		count(STAT_BYTES_SAVED, plen - k);
		return l4 + k;
	}
	if (keep > off) {
		__u32 k = keep - off;
		if (k >= plen)
			return whole;
		count(STAT_BYTES_SAVED, plen - k);
		return l4 + k;
	}
	/* Nothing needed in this fragment: report its headers instead. */
	struct dropped *d = bpf_ringbuf_reserve(&DROPPED, sizeof(*d), 0);
	if (!d) {
		count(STAT_RING_FULL, 1);
		return l4; /* headers only */
	}
	d->orig_len = skb->len;
	d->hdr_len = l4;
	if (l4 == ETH_HLEN + 20) {
		if (bpf_skb_load_bytes(skb, 0, d->data, ETH_HLEN + 20) < 0) {
			bpf_ringbuf_discard(d, 0);
			return whole;
		}
	} else {
		if (bpf_skb_load_bytes(skb, 0, d->data, ETH_HLEN + 4 + 20) < 0) {
			bpf_ringbuf_discard(d, 0);
			return whole;
		}
	}
	bpf_ringbuf_submit(d, 0);
	count(STAT_LEFT_OUT, 1);
	count(STAT_BYTES_SAVED, skb->len);
	return 0;
}

/* ------------------------------------------------------------------------
 * Records mode (ddscope_records; docs/online.md, "In-kernel records").
 *
 * The socket gets only what must pass whole: discovery (a datagram passes
 * whole from the first DATA / DATA_FRAG of a built-in writer on: the
 * analyses read discovery samples entirely; whatever the ports, as Fast DDS
 * may use even ports for user data) and everything that is not RTPS over
 * IPv4 UDP. Of every other frame the program writes ONE record into RECORDS and
 * returns 0 (the packet socket receives nothing): the frame's timestamp
 * (skb->tstamp, the very value the packet socket would have used), its length
 * and the bytes the analyses read as (offset, length, bytes) segments:
 * Ethernet/VLAN/IPv4 headers, the UDP and RTPS headers, every submessage
 * header with its body (a DATA / DATA_FRAG: its first KEEP_DATA bytes),
 * followed across IP fragments with FRAGS. User space rebuilds a frame of
 * the original length with zeros elsewhere.
 *
 * A frame passes whole instead (always exact) when the program cannot
 * report it exactly: no usable skb->tstamp (the kernel stamps frames only
 * while some socket asked for timestamps; a monotonic delivery time is not
 * what the packet socket reports either), the record ring full, a record
 * larger than REC_BUF, a datagram it cannot follow.
 */

#define REC_BUF 1024   /* segment bytes per record (a power of two) */
#define SEG_MAX 128    /* bytes per segment */
#define REC_HDR 24

struct record {
	__u64 tstamp;        /* CLOCK_REALTIME ns, skb->tstamp */
	__u32 wire_len;      /* the frame's length */
	__u32 used;          /* bytes of buf[]: segments (u16 offset, u16 length, bytes) */
	__u64 passed_before; /* frames passed to the socket before this one (STAT_PASSED) */
	__u8 buf[REC_BUF + SEG_MAX + 4];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct record);
} SCRATCH SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} RECORDS SEC(".maps");

/* The kernel's struct sk_buff, as far as read here (CO-RE: offsets come
 * from the running kernel's BTF when the object is loaded). */
struct sk_buff___dd {
	__s64 tstamp;
	__u8 tstamp_type:2;
} __attribute__((preserve_access_index));

/* The time the packet socket would give this frame: skb->tstamp when it is
 * a real-time stamp (tpacket_get_timestamp / skb_tstamp), else 0 (the
 * socket would take the clock itself, later: not reproducible here). */
static __always_inline __u64 frame_tstamp(struct __sk_buff *skb)
{
	struct sk_buff___dd *k = (void *)skb;
	__s64 ts = 0;
	if (bpf_probe_read_kernel(&ts, sizeof(ts), &k->tstamp) < 0)
		return 0;
	__u64 type = BPF_CORE_READ_BITFIELD_PROBED(k, tstamp_type);
	if (type || ts <= 0)
		return 0;
	return (__u64)ts;
}

static __always_inline __u32 pass(__u32 len)
{
	count(STAT_PASSED, 1);
	return len;
}

/* Appends the frame bytes [off, off + len) as a segment. */
static __always_inline int seg(struct __sk_buff *skb, struct record *r, __u32 off, __u32 len)
{
	if (len == 0)
		return 0;
	__u64 pos = r->used;
	if (len > SEG_MAX || off > 0xffff)
		return -1;
	if (pos >= REC_BUF)
		return -1;
	/* (no change) keeps the bound in the register the verifier checks */
	asm volatile("%[p] &= 1023" : [p] "+r"(pos));
	r->buf[pos] = off & 0xff;
	r->buf[pos + 1] = off >> 8;
	r->buf[pos + 2] = len & 0xff;
	r->buf[pos + 3] = len >> 8;
	/* len is 1..SEG_MAX here; the mask says so to the verifier. */
	if (bpf_skb_load_bytes(skb, off, &r->buf[pos + 4], ((len - 1) & (SEG_MAX - 1)) + 1) < 0)
		return -1;
	r->used = pos + 4 + len;
	return 0;
}

/* Like walk(), for records: the bytes the analyses read in [off, end) of the
 * IP payload become segments. < 0: this frame and the rest of the datagram
 * pass whole (st->whole set): -1 the program cannot follow it, -2 a
 * discovery sample (a DATA / DATA_FRAG of a built-in writer, entity kind
 * 0xc0 set: all its bytes are read) starts here. */
static __always_inline int walk_rec(struct __sk_buff *skb, struct record *r, __u32 l4, struct frag_state *st, __u32 off, __u32 end)
{
	if (st->need_end > off) {
		__u32 e = st->need_end < end ? st->need_end : end;
		if (seg(skb, r, l4, e - off) < 0)
			goto give_up;
	}
	for (int i = 0; i < WALK_MAX; i++) {
		__u32 at = st->next;
		if (at >= st->total || at >= end)
			break;
		if (at + 4 > end)
			goto give_up; /* a submessage header split across two fragments */
		__u8 h[4];
		if (bpf_skb_load_bytes(skb, l4 + (at - off), h, 4) < 0)
			goto give_up;
		__u32 octets = (h[1] & 1) ? (__u32)h[2] | ((__u32)h[3] << 8) : ((__u32)h[2] << 8) | h[3];
		__u32 len = octets ? 4 + octets : st->total - at;
		__u32 need = len;
		if (h[0] == SUBMSG_DATA || h[0] == SUBMSG_DATA_FRAG) {
			/* writerId's entity kind: the last byte of the fixed fields' writerId */
			__u8 kind;
			if (at + 16 > end || bpf_skb_load_bytes(skb, l4 + (at - off) + 15, &kind, 1) < 0)
				goto give_up;
			if ((kind & 0xc0) == 0xc0) {
				st->whole = 1;
				return -2;
			}
			if (!(h[1] & 2) && need > KEEP_DATA)
				need = KEEP_DATA;
		}
		__u32 e = at + need < end ? at + need : end;
		if (seg(skb, r, l4 + (at - off), e - at) < 0)
			goto give_up;
		st->need_end = at + need;
		st->next = at + len;
	}
	if (st->next < end && st->next < st->total)
		goto give_up; /* more headers in this fragment than one walk examines */
	return 0;
give_up:
	st->whole = 1;
	count(STAT_UNFOLLOWED, 1);
	return -1;
}

/* Writes the record of this frame and leaves the frame out, or passes it whole. */
static __always_inline __u32 emit(struct __sk_buff *skb, struct record *r, __u32 whole)
{
	__u64 ts = frame_tstamp(skb);
	if (!ts) {
		count(STAT_NO_TSTAMP, 1);
		return pass(whole);
	}
	r->tstamp = ts;
	r->wire_len = whole;
	__u32 which = STAT_PASSED;
	__u64 *p = bpf_map_lookup_elem(&STATS, &which);
	r->passed_before = p ? *p : 0;
	__u32 size = REC_HDR + r->used;
	if (size > sizeof(*r))
		return pass(whole);
	if (bpf_ringbuf_output(&RECORDS, r, size, BPF_RB_NO_WAKEUP) < 0) {
		count(STAT_RING_FULL, 1);
		return pass(whole);
	}
	return 0; /* counted by user space, which reads the record */
}

SEC("socket")
int ddscope_records(struct __sk_buff *skb)
{
	/* No per-frame counter here: every frame either passes (STAT_PASSED)
	 * or comes as a record, and user space counts records; an atomic add on
	 * a line both CPUs write costs on the path of every frame. */
	__u32 whole = skb->len;
	/* A VLAN tag the NIC took off is put back by libpcap from metadata, not
	 * by a record: such frames pass whole. */
	if (skb->vlan_present)
		return pass(whole);

	__u32 l3 = ETH_HLEN;
	__be16 proto;
	if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
		return pass(whole);
	if (proto == bpf_htons(ETH_P_8021Q)) {
		l3 += 4;
		if (bpf_skb_load_bytes(skb, 16, &proto, 2) < 0)
			return pass(whole);
	}
	if (proto != bpf_htons(ETH_P_IP))
		return pass(whole);
	__u8 ip[20];
	if (bpf_skb_load_bytes(skb, l3, ip, 20) < 0)
		return pass(whole);
	if (ip[9] != 17 /* UDP */ || (ip[0] & 0x0f) != 5 /* IP options: not followed */)
		return pass(whole);
	__u16 frag = ((__u16)ip[6] << 8) | ip[7];
	__u32 more = frag & 0x2000;
	__u32 off = (__u32)(frag & 0x1fff) * 8;
	__u32 tot = ((__u32)ip[2] << 8) | ip[3];
	if (tot < 20 || l3 + tot > skb->len)
		return pass(whole);
	__u32 plen = tot - 20;
	__u32 l4 = l3 + 20;
	__u32 end = off + plen;

	__u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&SCRATCH, &zero);
	if (!r)
		return pass(whole);
	r->used = 0;

	if (!more && off == 0) {
		/* A whole datagram. */
		__u8 u[12];
		if (plen < 28 || bpf_skb_load_bytes(skb, l4, u, 12) < 0)
			return pass(whole);
		__u32 ulen = ((__u32)u[4] << 8) | u[5];
		if (u[8] != 'R' || u[9] != 'T' || u[10] != 'P' || u[11] != 'S' || ulen != plen)
			return pass(whole); /* not RTPS */
		struct frag_state st = {};
		st.total = plen;
		st.next = 8 + 20;
		st.need_end = 8 + 20;
		if (seg(skb, r, 0, l4 + 8 + 20) < 0)
			return pass(whole);
		if (walk_rec(skb, r, l4, &st, 0, plen) < 0)
			return pass(whole);
		return emit(skb, r, whole);
	}

	struct frag_key key = frag_key_of(ip);

	struct frag_state *st = bpf_map_lookup_elem(&FRAGS, &key);
	if (!st) {
		if (off != 0) {
			mark_unfollowed(&key, plen, more, end, 0);
			return pass(whole);
		}
		struct frag_state fresh = {};
		__u8 u[12];
		if (plen < 12 || bpf_skb_load_bytes(skb, l4, u, 12) < 0)
			return pass(whole);
		fresh.total = ((__u32)u[4] << 8) | u[5];
		fresh.covered = plen;
		fresh.next = 8 + 20;
		fresh.need_end = 8 + 20;
		if (u[8] != 'R' || u[9] != 'T' || u[10] != 'P' || u[11] != 'S' || fresh.total < 28 || plen < 28)
			fresh.whole = 1; /* not RTPS: all of it */
		int ok = -1;
		if (!fresh.whole && seg(skb, r, 0, l4 + 8 + 20) == 0)
			ok = walk_rec(skb, r, l4, &fresh, 0, end);
		else
			fresh.whole = 1;
		if (fresh.covered >= fresh.total && fresh.total) {
			count(STAT_COMPLETED, 1);
			return pass(whole);
		}
		if (bpf_map_update_elem(&FRAGS, &key, &fresh, BPF_ANY) < 0) {
			count(STAT_NO_STATE, 1);
			return pass(whole);
		}
		if (ok < 0)
			return pass(whole);
		return emit(skb, r, whole);
	}

	st->covered += plen;
	if (!more)
		st->total = end;
	if (st->whole) {
		if (st->total && st->covered >= st->total) {
			bpf_map_delete_elem(&FRAGS, &key);
			count(STAT_COMPLETED, 1);
		}
		return pass(whole);
	}
	int ok = walk_rec(skb, r, l4, st, off, end);
	if (st->covered >= st->total) {
		bpf_map_delete_elem(&FRAGS, &key);
		count(STAT_COMPLETED, 1);
	}
	if (ok < 0)
		return pass(whole);
	if (seg(skb, r, 0, l4) < 0)
		return pass(whole);
	return emit(skb, r, whole);
}
