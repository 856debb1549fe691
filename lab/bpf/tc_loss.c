// SPDX-License-Identifier: GPL-2.0
// ddscope lab: packet loss without netem (tc clsact egress, cls_bpf direct-action).
//
// A Gilbert-Elliott channel: a good and a bad state, P(good -> bad) = p,
// P(bad -> good) = r, loss probability 1 - k in the good state and 1 - h in
// the bad one. Bernoulli loss of probability q is 1 - k = q with p = 0
// (the chain never leaves the good state). Probabilities are fixed point: a probability x is stored as
// x * 2^32 (saturated), compared with bpf_get_prandom_u32().
//
// Only IPv4 frames are eligible (ARP is never dropped, so neighbours stay
// resolved). The program counts what it saw and what it dropped, per state.
// The user space side (crates/lab/src/tcbpf.rs) writes `loss_cfg` and reads
// `loss_stats` through the bpf(2) syscall.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct loss_cfg {
	__u64 p_good_bad; // P(good -> bad) * 2^32
	__u64 p_bad_good; // P(bad -> good) * 2^32
	__u64 loss_good;  // loss probability in the good state * 2^32
	__u64 loss_bad;   // loss probability in the bad state * 2^32
	__u64 enabled;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loss_cfg);
} loss_cfg SEC(".maps");

// 0: the chain's state (0 good, 1 bad)
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} loss_state SEC(".maps");

// 0: eligible frames seen, 1: dropped, 2: dropped in the bad state, 3: good -> bad transitions
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} loss_stats SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&loss_stats, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

// true with probability x / 2^32 (x >= 2^32: always)
static __always_inline int chance(__u64 x)
{
	if (x >= (1ULL << 32))
		return 1;
	return (__u64)bpf_get_prandom_u32() < x;
}

SEC("tc_loss_egress")
int loss_egress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct loss_cfg *c = bpf_map_lookup_elem(&loss_cfg, &zero);
	__u64 *state = bpf_map_lookup_elem(&loss_state, &zero);
	if (!c || !state || !c->enabled)
		return TC_ACT_OK;
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	count(0);
	// advance the chain, then draw the loss in the new state
	if (*state == 0) {
		if (chance(c->p_good_bad)) {
			*state = 1;
			count(3);
		}
	} else if (chance(c->p_bad_good)) {
		*state = 0;
	}
	if (chance(*state ? c->loss_bad : c->loss_good)) {
		count(1);
		if (*state)
			count(2);
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
