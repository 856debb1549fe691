//! What a DDS sample or a UDP datagram becomes on the wire.
//!
//! Everything the thesis formula (Eq. 3.4) leaves out is counted here:
//!
//! | layer | bytes | when |
//! |---|---|---|
//! | preamble + SFD | 8 | every Ethernet frame |
//! | MAC header | 14 | every frame |
//! | 802.1Q VLAN tag | 4 | every frame, if the link is tagged |
//! | padding | up to 46 | frames shorter than the 64-byte minimum (header..FCS) |
//! | FCS | 4 | every frame |
//! | inter-frame gap | 12 | after every frame (occupies the link, not the receiver) |
//! | IPv4 header | 20 | every IP fragment |
//! | UDP header | 8 | once per datagram (first IP fragment) |
//! | RTPS header | 20 | once per datagram (RTPS message) |
//! | INFO_TS | 12 | once per datagram, if enabled (Cyclone and Fast DDS send it with data) |
//! | INFO_DST | 16 | once per datagram, if enabled (unicast to one reader) |
//! | DATA submessage header | 24 | unfragmented sample |
//! | DATA_FRAG submessage header | 36 | each DATA_FRAG submessage |
//! | submessage padding | 0–3 | DATA/DATA_FRAG bodies are padded to 4 bytes |
//!
//! IPv4 fragments carry at most `floor((MTU − 20) / 8) × 8` bytes of the
//! datagram each, because fragment offsets count in 8-byte units.

pub const PREAMBLE_SFD: u64 = 8;
pub const MAC_HEADER: u64 = 14;
pub const VLAN_TAG: u64 = 4;
pub const FCS: u64 = 4;
pub const IFG: u64 = 12;
/// Minimum MAC frame, destination address through FCS.
pub const MIN_FRAME: u64 = 64;
pub const IPV4_HEADER: u64 = 20;
pub const UDP_HEADER: u64 = 8;
pub const RTPS_HEADER: u64 = 20;
pub const INFO_TS: u64 = 12;
pub const INFO_DST: u64 = 16;
/// Submessage header (4) + extraFlags (2) + octetsToInlineQos (2) + readerId (4) + writerId (4) + writerSN (8).
pub const DATA_HEADER: u64 = 24;
/// DATA's 24 + fragmentStartingNum (4) + fragmentsInSubmessage (2) + fragmentSize (2) + sampleSize (4).
pub const DATA_FRAG_HEADER: u64 = 36;
/// IPv4 total-length limit.
pub const MAX_IP_PACKET: u64 = 65_535;
/// Largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: u64 = MAX_IP_PACKET - IPV4_HEADER - UDP_HEADER;
/// Largest DDS sample the frame model lays out: it keeps one entry per frame
/// (1 GiB is ~740 000 frames at MTU 1500, a few MB of model).
pub const MAX_SAMPLE_BYTES: u64 = 1 << 30;
/// Cyclone DDS defaults (General/FragmentSize, General/MaxMessageSize).
pub const CYCLONE_FRAGMENT: u64 = 1344;
pub const CYCLONE_MAX_MESSAGE: u64 = 14_720;

/// Link-layer framing of one port or one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    pub vlan: bool,
    /// IP MTU (bytes of IP packet per frame).
    pub mtu: u64,
}

impl Default for Framing {
    fn default() -> Self {
        Framing { vlan: true, mtu: 1500 }
    }
}

impl Framing {
    /// MAC frame bytes (header..FCS, padded) carrying an L3 packet of `l3` bytes.
    pub fn l2_bytes(&self, l3: u64) -> u64 {
        let tag = if self.vlan { VLAN_TAG } else { 0 };
        (MAC_HEADER + tag + l3 + FCS).max(MIN_FRAME)
    }

    /// Padding added to reach the minimum frame size.
    pub fn padding(&self, l3: u64) -> u64 {
        let tag = if self.vlan { VLAN_TAG } else { 0 };
        MIN_FRAME.saturating_sub(MAC_HEADER + tag + l3 + FCS)
    }

    /// Datagram bytes (UDP header + payload) carried per IP fragment.
    pub fn fragment_payload(&self) -> u64 {
        (self.mtu - IPV4_HEADER) / 8 * 8
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.mtu < 68 {
            return Err(format!("MTU {} is below the IPv4 minimum of 68", self.mtu));
        }
        if self.mtu > 9216 {
            return Err(format!("MTU {} is above 9216 (jumbo frames larger than that are not modelled)", self.mtu));
        }
        Ok(())
    }

    /// Calls `f(l3_bytes)` for each IP fragment of a UDP datagram with `udp_payload` bytes of payload.
    pub fn for_each_ip_fragment(&self, udp_payload: u64, mut f: impl FnMut(u64)) {
        let mut left = udp_payload + UDP_HEADER;
        let per = self.fragment_payload();
        while left > per {
            f(IPV4_HEADER + per);
            left -= per;
        }
        f(IPV4_HEADER + left);
    }
}

/// The RTPS part of the model: which submessages accompany the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpsOptions {
    /// DATA_FRAG payload per submessage; `None` = Cyclone DDS default (1344).
    pub fragment_bytes: Option<u64>,
    /// Largest RTPS message (UDP payload); `None` = Cyclone's 14720 when the
    /// fragment size is defaulted, else the largest that fits one fragment
    /// per datagram (the IPv4 limit).
    pub max_message_bytes: Option<u64>,
    pub info_ts: bool,
    pub info_dst: bool,
}

impl Default for RtpsOptions {
    fn default() -> Self {
        RtpsOptions { fragment_bytes: None, max_message_bytes: None, info_ts: true, info_dst: false }
    }
}

fn pad4(n: u64) -> u64 {
    n.div_ceil(4) * 4
}

/// Accounting of everything a message puts on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WireBreakdown {
    /// Application bytes (the serialized sample or the UDP payload).
    pub payload_bytes: u64,
    pub datagrams: u64,
    pub rtps_submessages: u64,
    /// RTPS header, INFO_TS/INFO_DST, DATA/DATA_FRAG headers and their padding.
    pub rtps_overhead_bytes: u64,
    pub udp_header_bytes: u64,
    pub ip_header_bytes: u64,
    pub frames: u64,
    /// Preamble, MAC header, VLAN tag, FCS and IFG over all frames.
    pub ethernet_overhead_bytes: u64,
    pub padding_bytes: u64,
    /// Everything that occupies the link, IFG included.
    pub wire_bytes: u64,
}

/// The frames of one message: MAC frame bytes (header..FCS) of each, in
/// transmission order; `datagram_ends[i]` is the frame count after datagram i.
#[derive(Debug, Clone, Default)]
pub struct MessageFrames {
    pub l2: Vec<u32>,
    pub breakdown: WireBreakdown,
    /// Frame count after each datagram (empty for hand-built frame lists: one datagram).
    pub datagram_ends: Vec<u32>,
}

impl MessageFrames {
    fn push_datagram(&mut self, framing: &Framing, udp_payload: u64) {
        let b = &mut self.breakdown;
        b.datagrams += 1;
        b.udp_header_bytes += UDP_HEADER;
        let tag = if framing.vlan { VLAN_TAG } else { 0 };
        let l2 = &mut self.l2;
        framing.for_each_ip_fragment(udp_payload, |l3| {
            let frame = framing.l2_bytes(l3);
            l2.push(frame as u32);
            b.frames += 1;
            b.ip_header_bytes += IPV4_HEADER;
            b.padding_bytes += framing.padding(l3);
            b.ethernet_overhead_bytes += PREAMBLE_SFD + MAC_HEADER + tag + FCS + IFG;
            b.wire_bytes += PREAMBLE_SFD + frame + IFG;
        });
        self.datagram_ends.push(self.l2.len() as u32);
    }

    /// A plain UDP datagram (iperf3, IVN pattern) with `payload` bytes.
    pub fn udp(framing: &Framing, payload: u64) -> Result<Self, String> {
        if payload > MAX_UDP_PAYLOAD {
            return Err(format!("UDP payload {payload} exceeds the IPv4 maximum of {MAX_UDP_PAYLOAD}"));
        }
        let mut m = MessageFrames::default();
        m.breakdown.payload_bytes = payload;
        m.push_datagram(framing, payload);
        Ok(m)
    }

    /// A sample in a layout read off a capture: one datagram per RTPS
    /// message length of `messages` (UDP payload bytes, in order), carrying
    /// `sample` serialized bytes in all. The layout of the DDS implementation
    /// as it is, where [`MessageFrames::dds_sample`] builds one from options
    /// (Cyclone DDS, for one, puts ten 1344-byte fragments in one DATA_FRAG
    /// submessage followed by a HEARTBEAT_FRAG).
    pub fn measured(framing: &Framing, sample: u64, messages: &[u64]) -> Result<Self, String> {
        if messages.is_empty() {
            return Err("a measured layout needs at least one RTPS message".into());
        }
        let mut m = MessageFrames::default();
        m.breakdown.payload_bytes = sample;
        for &udp in messages {
            if udp > MAX_UDP_PAYLOAD {
                return Err(format!("RTPS message size {udp} exceeds the largest UDP payload ({MAX_UDP_PAYLOAD})"));
            }
            m.breakdown.rtps_overhead_bytes += udp;
            m.push_datagram(framing, udp);
        }
        m.breakdown.rtps_overhead_bytes = m.breakdown.rtps_overhead_bytes.saturating_sub(sample);
        Ok(m)
    }

    /// A DDS sample of `sample` serialized bytes: RTPS messages of DATA or
    /// DATA_FRAG submessages, each an UDP datagram, each IP-fragmented.
    /// Samples over [`MAX_SAMPLE_BYTES`] are refused before anything is laid out.
    pub fn dds_sample(framing: &Framing, rtps: &RtpsOptions, sample: u64) -> Result<Self, String> {
        if sample > MAX_SAMPLE_BYTES {
            return Err(format!(
                "a sample of {sample} bytes is over the model's limit of {MAX_SAMPLE_BYTES} bytes (1 GiB): it keeps one entry per frame"
            ));
        }
        let per_msg = RTPS_HEADER + if rtps.info_ts { INFO_TS } else { 0 } + if rtps.info_dst { INFO_DST } else { 0 };
        let frag = rtps.fragment_bytes.unwrap_or(CYCLONE_FRAGMENT);
        let max_msg = match (rtps.max_message_bytes, rtps.fragment_bytes) {
            (Some(m), _) => m,
            (None, None) => CYCLONE_MAX_MESSAGE,
            (None, Some(_)) => MAX_UDP_PAYLOAD,
        };
        if frag == 0 || frag % 4 != 0 {
            return Err(format!("DDS fragment size {frag} must be a positive multiple of 4"));
        }
        if max_msg > MAX_UDP_PAYLOAD {
            return Err(format!("RTPS message size {max_msg} exceeds the largest UDP payload ({MAX_UDP_PAYLOAD})"));
        }
        let mut m = MessageFrames::default();
        m.breakdown.payload_bytes = sample;
        // Unfragmented DATA when the whole sample fits one message.
        if per_msg + DATA_HEADER + pad4(sample) <= max_msg && sample <= frag {
            let udp = per_msg + DATA_HEADER + pad4(sample);
            m.breakdown.rtps_submessages = 1;
            m.breakdown.rtps_overhead_bytes = udp - sample;
            m.push_datagram(framing, udp);
            return Ok(m);
        }
        let per_frag_sub = DATA_FRAG_HEADER + frag;
        if per_msg + per_frag_sub > max_msg {
            return Err(format!(
                "a DATA_FRAG of {frag} bytes needs an RTPS message of {} bytes, more than the limit of {max_msg} \
                 (the largest fragment that fits is {})",
                per_msg + per_frag_sub,
                (max_msg - per_msg - DATA_FRAG_HEADER) / 4 * 4
            ));
        }
        let subs_per_msg = (max_msg - per_msg) / per_frag_sub;
        let mut left = sample;
        while left > 0 {
            let mut udp = per_msg;
            let mut data = 0;
            for _ in 0..subs_per_msg {
                if left == 0 {
                    break;
                }
                let take = left.min(frag);
                udp += DATA_FRAG_HEADER + pad4(take);
                data += take;
                left -= take;
                m.breakdown.rtps_submessages += 1;
            }
            m.breakdown.rtps_overhead_bytes += udp - data;
            m.push_datagram(framing, udp);
        }
        Ok(m)
    }

    pub fn frames(&self) -> usize {
        self.l2.len()
    }
}

/// Bits a frame of `l2` MAC bytes puts on the wire before the receiver has it
/// all (preamble + frame), and the time the link is busy (plus IFG).
pub fn tx_bytes(l2: u64) -> u64 {
    PREAMBLE_SFD + l2
}
pub fn busy_bytes(l2: u64) -> u64 {
    PREAMBLE_SFD + l2 + IFG
}

/// Picoseconds to serialise `bytes` at `rate` bit/s, rounded up.
pub fn bytes_to_ps(bytes: u64, rate: u64) -> u64 {
    let num = bytes as u128 * 8 * 1_000_000_000_000u128;
    num.div_ceil(rate as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    // Oracle: hand derivation from the header sizes in the module table.
    #[test]
    fn iperf3_datagram_is_one_frame_of_1512_wire_bytes() {
        // 1400 B payload + 8 UDP + 20 IP = 1428 B IP packet < 1500 MTU: one frame.
        // MAC: 14 + 4 VLAN + 1428 + 4 FCS = 1450; wire = 8 + 1450 + 12 = 1470.
        let m = MessageFrames::udp(&Framing::default(), 1400).unwrap();
        assert_eq!(m.l2, vec![1450]);
        assert_eq!(m.breakdown.wire_bytes, 1470);
        // Bosk et al. Eq. 7: B_O = 70 bytes of overhead for VLAN-tagged UDP.
        assert_eq!(m.breakdown.wire_bytes - 1400, 70);
    }

    #[test]
    fn ip_fragments_are_8_byte_aligned() {
        // 4000 B of UDP payload + 8 = 4008 B datagram; MTU 1500 -> 1480 per fragment:
        // 1480 + 1480 + 1048.
        let f = Framing { vlan: false, mtu: 1500 };
        let mut v = vec![];
        f.for_each_ip_fragment(4000, |l3| v.push(l3));
        assert_eq!(v, vec![1500, 1500, 1068]);
        // MTU 1006: (1006-20)/8*8 = 984, not 986.
        let f = Framing { vlan: false, mtu: 1006 };
        assert_eq!(f.fragment_payload(), 984);
    }

    #[test]
    fn small_frames_are_padded_to_64_bytes() {
        // 36 B sample: DATA = 20 RTPS + 12 INFO_TS + 24 DATA + 36 = 92 B UDP payload;
        // IP 20 + 8 + 92 = 120 -> frame 14+4+120+4 = 142 (no padding).
        let m = MessageFrames::dds_sample(&Framing::default(), &RtpsOptions::default(), 36).unwrap();
        assert_eq!(m.l2, vec![142]);
        assert_eq!(m.breakdown.padding_bytes, 0);
        // A 1-byte UDP payload: IP 29 B, MAC 14+29+4 = 47 -> padded to 64 (17 bytes of padding).
        let m = MessageFrames::udp(&Framing { vlan: false, mtu: 1500 }, 1).unwrap();
        assert_eq!(m.l2, vec![64]);
        assert_eq!(m.breakdown.padding_bytes, 17);
    }

    #[test]
    fn thesis_image_with_64kb_fragments() {
        // 2764848-byte sample, 64000-byte DATA_FRAGs, one per datagram:
        // 43 full datagrams (UDP payload 20+12+36+64000 = 64068) and one of 20+12+36+12848 = 12916.
        let rtps = RtpsOptions { fragment_bytes: Some(64_000), ..Default::default() };
        let m = MessageFrames::dds_sample(&Framing::default(), &rtps, 2_764_848).unwrap();
        assert_eq!(m.breakdown.datagrams, 44);
        // Full datagram: 64076 bytes of IP payload -> ceil(64076/1480) = 44 fragments; last: 12924 -> 9.
        assert_eq!(m.breakdown.frames, 43 * 44 + 9);
        assert_eq!(m.breakdown.rtps_overhead_bytes, 44 * 68);
        assert_eq!(m.breakdown.ip_header_bytes, 20 * (43 * 44 + 9));
        let sum: u64 = m.l2.iter().map(|&b| busy_bytes(b as u64)).sum();
        assert_eq!(sum, m.breakdown.wire_bytes);
        assert_eq!(
            m.breakdown.wire_bytes,
            m.breakdown.payload_bytes
                + m.breakdown.rtps_overhead_bytes
                + m.breakdown.udp_header_bytes
                + m.breakdown.ip_header_bytes
                + m.breakdown.ethernet_overhead_bytes
                + m.breakdown.padding_bytes
        );
    }

    #[test]
    fn cyclone_default_packs_ten_fragments_per_datagram() {
        // 14720 - 32 = 14688 / (36 + 1344) = 10 DATA_FRAGs per message (DESIGN.md: ~10 per 13.5 KB datagram).
        let m = MessageFrames::dds_sample(&Framing::default(), &RtpsOptions::default(), 2_764_800).unwrap();
        assert_eq!(m.breakdown.rtps_submessages, 2_764_800u64.div_ceil(1344));
        assert_eq!(m.breakdown.datagrams, m.breakdown.rtps_submessages.div_ceil(10));
    }

    #[test]
    fn oversized_fragment_is_an_error() {
        let rtps = RtpsOptions { fragment_bytes: Some(65_536), ..Default::default() };
        let e = MessageFrames::dds_sample(&Framing::default(), &rtps, 2_764_800).unwrap_err();
        assert!(e.contains("largest fragment that fits is 65436"), "{e}");
    }

    #[test]
    fn picoseconds_are_exact_for_common_rates() {
        assert_eq!(bytes_to_ps(1542, 2_500_000_000), 4_934_400);
        assert_eq!(bytes_to_ps(1500, 1_000_000_000), 12_000_000);
    }
}
