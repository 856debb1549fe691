// SPDX-License-Identifier: GPL-2.0
// ddscope lab: 802.1Q tags without the 8021q module (tc clsact, cls_bpf direct-action).
//
// Egress ("tc_vlan_egress"): an IPv4 packet whose destination matches a rule of
// `vlan_rules` leaves with an 802.1Q tag (VID, PCP of the rule), pushed with
// bpf_skb_vlan_push. The rules are the topic -> PCP mapping that
// `ddscope tsn config --emit dds` writes: a network partition's multicast
// address (any port), a UDP destination port (any address), or both.
// Lookup order: (address, port), (address, any port), (any address, port).
//
// Ingress ("tc_vlan_ingress"): the matching pop. The kernel has already moved
// the tag into skb metadata before clsact ingress runs; without the 8021q
// module nothing would accept the tagged frame, so it is popped here and the
// DDS stack receives an untagged frame. Packet taps (tcpdump) run before
// clsact ingress and after clsact egress, so both ends' captures show the tag.
//
// The user space side (crates/lab/src/tcbpf.rs) fills `vlan_rules` and reads
// `vlan_stats` through the bpf(2) syscall.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct vlan_key {
	__u32 daddr; // network byte order; 0 = any address
	__u16 dport; // network byte order; 0 = any port
	__u16 pad;
};

struct vlan_val {
	__u16 vid;
	__u8 pcp;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct vlan_key);
	__type(value, struct vlan_val);
} vlan_rules SEC(".maps");

// 0: tagged on egress, 1: untagged on egress (no rule), 2: popped on ingress,
// 3: passed untagged on ingress, 4: helper failures, 5: egress already tagged
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 6);
	__type(key, __u32);
	__type(value, __u64);
} vlan_stats SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&vlan_stats, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline struct vlan_val *lookup(__u32 daddr, __u16 dport)
{
	struct vlan_key k = {.daddr = daddr, .dport = dport, .pad = 0};
	struct vlan_val *v;
	if (dport) {
		v = bpf_map_lookup_elem(&vlan_rules, &k);
		if (v)
			return v;
	}
	k.dport = 0;
	v = bpf_map_lookup_elem(&vlan_rules, &k);
	if (v)
		return v;
	if (!dport)
		return 0;
	k.daddr = 0;
	k.dport = dport;
	return bpf_map_lookup_elem(&vlan_rules, &k);
}

SEC("tc_vlan_egress")
int vlan_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u16 dport = 0;

	if (skb->vlan_present) {
		count(5);
		return TC_ACT_OK;
	}
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto untagged;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl < 5)
		goto untagged;
	// the UDP header is in the first fragment only: later fragments match by address
	if (ip->protocol == IPPROTO_UDP && !(ip->frag_off & bpf_htons(0x1fff))) {
		struct udphdr *udp = (void *)ip + ip->ihl * 4;
		if ((void *)(udp + 1) > end)
			goto untagged;
		dport = udp->dest;
	}
	struct vlan_val *v = lookup(ip->daddr, dport);
	if (!v)
		goto untagged;
	if (bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), ((__u16)(v->pcp & 7) << 13) | (v->vid & 0x0fff))) {
		count(4);
		return TC_ACT_OK;
	}
	count(0);
	return TC_ACT_OK;
untagged:
	count(1);
	return TC_ACT_OK;
}

SEC("tc_vlan_ingress")
int vlan_ingress(struct __sk_buff *skb)
{
	if (!skb->vlan_present) {
		count(3);
		return TC_ACT_OK;
	}
	if (bpf_skb_vlan_pop(skb)) {
		count(4);
		return TC_ACT_OK;
	}
	count(2);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
