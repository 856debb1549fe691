// SPDX-License-Identifier: GPL-2.0
// ddscope lab: the floor cost of capturing from a tc hook instead of a packet
// socket (issue 12). Attached at clsact ingress and egress of every host's
// link interface, it does what a tc-based capture would do before writing a
// record: read the frame's first 64 bytes and look at the Ethernet, IPv4 and
// UDP headers; it writes nothing anywhere but its counters, so it measures
// the hook and the header read, not a ring buffer or its reader.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

// 0: frames, 1: bytes (skb->len), 2: IPv4 UDP frames, 3: IPv4 fragments after the first
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} probe_stats SEC(".maps");

static __always_inline void add(__u32 i, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&probe_stats, &i);
	if (v)
		__sync_fetch_and_add(v, n);
}

SEC("tc_probe")
int tc_probe_prog(struct __sk_buff *skb)
{
	__u8 h[64];
	add(0, 1);
	add(1, skb->len);
	if (skb->len < sizeof(h) || bpf_skb_load_bytes(skb, 0, h, sizeof(h)) < 0)
		return TC_ACT_OK;
	if (h[12] != 0x08 || h[13] != 0x00 || (h[14] >> 4) != 4)
		return TC_ACT_OK;
	if (((h[20] & 0x1f) | h[21]) != 0)
		add(3, 1);
	else if (h[23] == 17)
		add(2, 1);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
