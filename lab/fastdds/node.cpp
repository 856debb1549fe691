// ddslab-fastdds: one emulated ROS 2 node on Fast DDS 2.9 (C++ API).
//
// Same command line, same messages (lab/common/rosmsg.c) and same ground-truth
// file as ddslab-cyclone, so a scenario can put Fast DDS on the wire for any
// node (`vendor = "fastdds"`). Samples are handed to Fast DDS already
// serialised through a TopicDataType that copies the bytes; the type name in
// discovery is the ROS 2 DDS type name, as rmw_fastrtps announces it. With
// --tracing the node also plays rclcpp / rcl / rmw_fastrtps's tracepoints
// (lab/common/nodetrace.h).
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/publisher/qos/DataWriterQos.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/DataReaderListener.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/subscriber/qos/DataReaderQos.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/dds/topic/TypeSupport.hpp>
#include <fastdds/rtps/common/WriteParams.h>
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastrtps/config.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "nodecfg.h"
#include "nodetrace.h"

using namespace eprosima::fastdds::dds;
using eprosima::fastrtps::rtps::GUID_t;
using eprosima::fastrtps::rtps::SerializedPayload_t;
using eprosima::fastrtps::rtps::InstanceHandle_t;

namespace {

std::atomic<int> g_stop{0};
volatile int g_stop_flag = 0;
int64_t g_t0 = 0, g_tstop = 0;
truth_log g_truth;
node_config g_cfg;

struct Sample {
  const uint8_t* buf = nullptr;
  uint32_t len = 0;
};

// A keyless type whose serialised form is the caller's bytes (encapsulation header included).
class RawType : public TopicDataType {
 public:
  RawType(const char* dds_name, uint32_t max_size) {
    setName(dds_name);
    m_typeSize = max_size;
    m_isGetKeyDefined = false;
  }
  bool serialize(void* data, SerializedPayload_t* payload) override {
    auto* s = static_cast<Sample*>(data);
    if (payload->max_size < s->len) return false;
    std::memcpy(payload->data, s->buf, s->len);
    payload->length = s->len;
    payload->encapsulation = s->len > 1 && (s->buf[1] & 1) ? CDR_LE : CDR_BE;
    return true;
  }
  bool deserialize(SerializedPayload_t* payload, void* data) override {
    auto* s = static_cast<Sample*>(data);
    s->buf = nullptr;
    s->len = payload->length;
    return true;
  }
  std::function<uint32_t()> getSerializedSizeProvider(void* data) override {
    auto* s = static_cast<Sample*>(data);
    return [s]() { return s->len; };
  }
  void* createData() override { return new Sample(); }
  void deleteData(void* data) override { delete static_cast<Sample*>(data); }
  bool getKey(void*, InstanceHandle_t*, bool) override { return false; }
};

void guid_to_hex(const GUID_t& g, char out[33]) {
  uint8_t b[16];
  std::memcpy(b, g.guidPrefix.value, 12);
  std::memcpy(b + 12, g.entityId.value, 4);
  guid_hex(b, out);
}

int64_t seq_of(const eprosima::fastrtps::rtps::SequenceNumber_t& sn) {
  return (static_cast<int64_t>(sn.high) << 32) | sn.low;
}

struct Outlet {
  node_spec* spec = nullptr;
  DataWriter* writer = nullptr;
  char guid[33] = {0};
  uint64_t published = 0, failed = 0;
  double credit = 0;
  std::thread th;
  std::mutex lock;
  nt_publisher nt{};

  void publish_one(const char* src_guid, int64_t src_seq) {
    std::lock_guard<std::mutex> g(lock);
    rosmsg* msg = &spec->msg;
    int64_t t;
    truth_pub_trace tr;
    if (nt_on) {
      // the user fills the message, then rclcpp::Publisher::publish -> rcl_publish -> rmw_publish,
      // which (rmw_fastrtps, Jazzy) takes Time_t::now(stamp), records rmw_publish with stamp.to_ns()
      // and writes the sample with write_w_timestamp(..., stamp); Humble's records
      // rmw_publish { message } and then data_writer_->write() stamps the sample
      rosmsg_set_stamp(msg, now_realtime_ns());
      rosmsg_set_counter(msg, published + 1);
      NT_TRACE(tr.rclcpp_publish, nt_api.rclcpp_publish(&nt.rcl, msg->buf));
      nt_api.rcl_publish(&nt.rcl, msg->buf);
      uint64_t mark = nt_clock_mark();
      if (nt_api.distro[0] == 'j') {
        // Jazzy: the rmw takes the stamp, records it in rmw_publish, writes with it
        tr.rmw_publish.rt_ns = t = now_realtime_ns();
        nt_api.rmw_publish(&nt.rmw, msg->buf, t);
        tr.rmw_publish.mono_ns = nt_event_mono(mark);
      } else {
        // Humble/Iron: TRACEPOINT(rmw_publish, msg) first; the DDS write stamps the sample after it
        nt_api.rmw_publish(&nt.rmw, msg->buf, 0);
        tr.rmw_publish.mono_ns = nt_event_mono(mark);
        tr.rmw_publish.rt_ns = t = now_realtime_ns();
      }
    } else {
      t = now_realtime_ns();
      rosmsg_set_stamp(msg, t);
      rosmsg_set_counter(msg, published + 1);
    }
    Sample s;
    s.buf = msg->buf;
    s.len = static_cast<uint32_t>(msg->size);
    eprosima::fastrtps::rtps::WriteParams wp;
    // the source timestamp (INFO_TS) is the publish time; Time_t(sec, x) would take x as a 2^-32 s fraction
    eprosima::fastrtps::rtps::Time_t ts;
    ts.seconds(static_cast<int32_t>(t / 1000000000));
    ts.nanosec(static_cast<uint32_t>(t % 1000000000));
    wp.source_timestamp(ts);
    // write_w_timestamp(data, HANDLE_NIL, ts) is this very call inside Fast DDS (a WriteParams with the
    // source timestamp); the WriteParams form also returns the sample identity, i.e. the sequence number
    if (writer->write(&s, wp)) {
      published++;
      if (nt_on) tr.tid = current_tid();
      truth_publish(&g_truth, t, spec->topic, guid, seq_of(wp.sample_identity().sequence_number()), msg->size,
                    src_guid, src_seq, nt_on ? &tr : nullptr);
    } else {
      failed++;
      if (failed <= 5) std::fprintf(stderr, "%s: write on %s failed\n", g_cfg.node, spec->topic);
    }
  }
};

struct Inlet : public DataReaderListener {
  node_spec* spec = nullptr;
  DataReader* reader = nullptr;
  std::atomic<uint64_t> received{0};
  std::vector<Outlet*> relays;
  nt_subscription nt{};

  // rmw_take of rmw_fastrtps: one sample per take, skipping invalid samples (instance state changes)
  static bool take_one(DataReader* r, Sample* s, SampleInfo* info) {
    while (r->take_next_sample(s, info) == ReturnCode_t::RETCODE_OK) {
      if (info->valid_data) return true;
    }
    return false;
  }

  // One taken sample: rmw_take -> rcl_take -> rclcpp_take -> the subscription callback (where relays
  // compute and publish), on this thread.
  void on_sample(const Sample& s, const SampleInfo& info) {
    char guid[33];
    guid_to_hex(info.sample_identity.writer_guid(), guid);
    int64_t sn = seq_of(info.sample_identity.sequence_number());
    int64_t src_ts = static_cast<int64_t>(info.source_timestamp.seconds()) * 1000000000 + info.source_timestamp.nanosec();
    truth_recv_trace tr;
    if (nt_on) {
      NT_TRACE(tr.rmw_take, nt_api.rmw_take(&nt.rmw, &s, src_ts, 1));
      nt_api.rcl_take(&s);
      nt_api.rclcpp_take(&s);
      NT_TRACE(tr.callback_start, nt_api.callback_start(&nt.callback, 0));
    } else {
      tr.rmw_take.rt_ns = now_realtime_ns();
    }
    // t_ns: the take returned the sample (rmw_take.rt_ns)
    received++;
    for (Outlet* o : relays) {
      o->credit += o->spec->ratio;
      if (o->credit >= 1.0 - 1e-9) {
        o->credit -= 1.0;
        compute_for(relay_compute_ns(o->spec, sn), o->spec->spin);
        o->publish_one(guid, sn);
      }
    }
    if (nt_on) {
      NT_TRACE(tr.callback_end, nt_api.callback_end(&nt.callback));
      tr.tid = current_tid();
    }
    truth_receive(&g_truth, tr.rmw_take.rt_ns, spec->topic, guid, sn, s.len, src_ts, nt_on ? &tr : nullptr);
  }

  // Takes until nothing is left; a notification whose first take finds no valid sample is an empty take.
  void on_data_available(DataReader* r) override {
    Sample s;
    SampleInfo info;
    for (int k = 0;; k++) {
      if (!take_one(r, &s, &info)) {
        if (k == 0) nt_take_nothing(&nt, &s);
        return;
      }
      on_sample(s, info);
    }
  }
};

void on_signal(int) {
  g_stop = 1;
  g_stop_flag = 1;
}

void pub_loop(Outlet* o) {
  const double period_ns = 1e9 / o->spec->rate_hz;
  for (uint64_t k = 0; !g_stop; k++) {
    int64_t due = g_t0 + static_cast<int64_t>(std::llround(static_cast<double>(k) * period_ns));
    if (due >= g_tstop) break;
    sleep_until_realtime(due, &g_stop_flag);
    if (g_stop) break;
    // the timer callback of a ROS 2 publisher node
    if (nt_on) nt_api.callback_start(&o->nt.timer_cb, 0);
    o->publish_one(nullptr, -1);
    // an injected sender burst: the next burst_count - 1 samples at once, their periods skipped
    if (o->spec->burst_every && k % o->spec->burst_every == 0)
      for (uint64_t b = 1; b < o->spec->burst_count && !g_stop; b++, k++) o->publish_one(nullptr, -1);
    if (nt_on) nt_api.callback_end(&o->nt.timer_cb);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("ddslab-fastdds fastdds %d.%d.%d\n", FASTRTPS_VERSION_MAJOR, FASTRTPS_VERSION_MINOR, FASTRTPS_VERSION_MICRO);
    return 0;
  }
  int r = nodecfg_parse(&g_cfg, argc, argv);
  if (r) return r > 0 ? 0 : 2;
  if (nodecfg_build(&g_cfg)) return 2;
  if (g_cfg.check_only) {
    for (int i = 0; i < g_cfg.nspecs; i++) {
      node_spec* sp = &g_cfg.specs[i];
      if (sp->kind != SPEC_SUB)
        std::printf("ok %s %s %zu bytes (n=%u m=%u)\n", sp->topic, rosmsg_dds_name(sp->type), sp->msg.size, sp->msg.n,
                    sp->msg.m);
    }
    return 0;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  if (truth_open(&g_truth, g_cfg.truth, g_cfg.host, g_cfg.node)) {
    std::fprintf(stderr, "%s: error: cannot write ground truth %s\n", g_cfg.node, g_cfg.truth);
    return 2;
  }
  char err[512];
  if (nt_init(g_cfg.tracing, err, sizeof err)) {
    std::fprintf(stderr, "%s: error: tracing: %s\n", g_cfg.node, err);
    return 2;
  }

  DomainParticipantQos pq = PARTICIPANT_QOS_DEFAULT;
  pq.name(g_cfg.node);
  const char* ud = "enclave=/;";
  pq.user_data().setValue(std::vector<eprosima::fastrtps::rtps::octet>(ud, ud + std::strlen(ud)));
  // UDPv4 only (no shared memory: the peers are Cyclone DDS processes), bound to the host's interface.
  pq.transport().use_builtin_transports = false;
  auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
  if (g_cfg.iface_ip[0]) udp->interfaceWhiteList.emplace_back(g_cfg.iface_ip);
  udp->sendBufferSize = 4 * 1024 * 1024;
  udp->receiveBufferSize = 4 * 1024 * 1024;
  pq.transport().user_transports.push_back(udp);
  for (int i = 0; i < g_cfg.nspecs; i++)
    if (g_cfg.specs[i].domain >= 0 && g_cfg.specs[i].domain != g_cfg.domain) {
      fprintf(stderr, "ddslab-fastdds: error: %s: a relay output in another domain (%d) needs the Cyclone DDS node\n", g_cfg.specs[i].topic, g_cfg.specs[i].domain);
      return 2;
    }
  DomainParticipant* pp = DomainParticipantFactory::get_instance()->create_participant(g_cfg.domain, pq);
  if (!pp) {
    std::fprintf(stderr, "%s: error: cannot create Fast DDS participant\n", g_cfg.node);
    return 3;
  }
  nt_node_init(g_cfg.node, "/");
  Publisher* pub = pp->create_publisher(PUBLISHER_QOS_DEFAULT);
  Subscriber* sub = pp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);

  std::map<std::string, Topic*> topics;
  std::vector<std::unique_ptr<Outlet>> outs;
  std::vector<std::unique_ptr<Inlet>> ins;
  for (int i = 0; i < g_cfg.nspecs; i++) {
    node_spec* sp = &g_cfg.specs[i];
    const char* tname = rosmsg_dds_name(sp->type);
    Topic* topic = nullptr;
    auto it = topics.find(sp->dds_topic);
    if (it != topics.end()) {
      topic = it->second;
    } else {
      // the largest sample of this type in the node sizes the payload pools
      uint32_t max_size = 64;
      for (int j = 0; j < g_cfg.nspecs; j++)
        if (g_cfg.specs[j].type == sp->type && g_cfg.specs[j].msg.size > max_size)
          max_size = static_cast<uint32_t>(g_cfg.specs[j].msg.size);
      if (sp->kind == SPEC_SUB && max_size < 16 * 1024 * 1024) max_size = 16 * 1024 * 1024;
      TypeSupport ts(new RawType(tname, max_size));
      ts.register_type(pp);
      topic = pp->create_topic(sp->dds_topic, tname, TOPIC_QOS_DEFAULT);
      if (!topic) {
        std::fprintf(stderr, "%s: error: cannot create topic %s\n", g_cfg.node, sp->dds_topic);
        return 3;
      }
      topics[sp->dds_topic] = topic;
    }
    if (sp->kind == SPEC_SUB) {
      auto in = std::make_unique<Inlet>();
      in->spec = sp;
      ins.push_back(std::move(in)); // the reader is created below, once its relays are known
    } else {
      auto o = std::make_unique<Outlet>();
      o->spec = sp;
      DataWriterQos q = DATAWRITER_QOS_DEFAULT;
      q.reliability().kind = sp->reliable ? RELIABLE_RELIABILITY_QOS : BEST_EFFORT_RELIABILITY_QOS;
      q.reliability().max_blocking_time = eprosima::fastrtps::Duration_t(10, 0);
      q.durability().kind = VOLATILE_DURABILITY_QOS;
      q.history().kind = KEEP_LAST_HISTORY_QOS;
      q.history().depth = sp->depth;
      // rmw_fastrtps (Humble) defaults: asynchronous publication, preallocated pools that may grow
      q.publish_mode().kind = ASYNCHRONOUS_PUBLISH_MODE;
      q.endpoint().history_memory_policy = eprosima::fastrtps::rtps::PREALLOCATED_WITH_REALLOC_MEMORY_MODE;
      q.data_sharing().off();
      o->writer = pub->create_datawriter(topic, q);
      if (!o->writer) {
        std::fprintf(stderr, "%s: error: cannot create writer %s\n", g_cfg.node, sp->topic);
        return 3;
      }
      guid_to_hex(o->writer->guid(), o->guid);
      {
        uint8_t g[16];
        std::memcpy(g, o->writer->guid().guidPrefix.value, 12);
        std::memcpy(g + 12, o->writer->guid().entityId.value, 4);
        nt_publisher_init(&o->nt, g, sp->topic, sp->depth);
        if (sp->kind == SPEC_PUB) {
          char sym[512];
          nt_timer_symbol(sym, sizeof sym, g_cfg.node, sp->topic);
          nt_timer_init(&o->nt, static_cast<int64_t>(std::llround(1e9 / sp->rate_hz)), sym);
        }
      }
      std::fprintf(stderr, "%s: writer %s type %s %zu bytes guid %s\n", g_cfg.node, sp->topic, tname, sp->msg.size,
                   o->guid);
      outs.push_back(std::move(o));
    }
  }
  // relays attach to the reader of their input topic before the reader exists, so no sample misses them
  for (auto& o : outs) {
    if (o->spec->kind != SPEC_RELAY) continue;
    for (auto& in : ins)
      if (!std::strcmp(in->spec->topic, o->spec->input)) { in->relays.push_back(o.get()); break; }
  }
  for (auto& in : ins) {
    node_spec* sp = in->spec;
    DataReaderQos q = DATAREADER_QOS_DEFAULT;
    q.reliability().kind = sp->reliable ? RELIABLE_RELIABILITY_QOS : BEST_EFFORT_RELIABILITY_QOS;
    q.durability().kind = VOLATILE_DURABILITY_QOS;
    q.history().kind = KEEP_LAST_HISTORY_QOS;
    q.history().depth = sp->depth;
    q.endpoint().history_memory_policy = eprosima::fastrtps::rtps::PREALLOCATED_WITH_REALLOC_MEMORY_MODE;
    q.data_sharing().off();
    // the listener is attached once the subscription is announced in the trace (rclcpp registers
    // the callback before the executor can run it)
    in->reader = sub->create_datareader(topics[sp->dds_topic], q, nullptr);
    if (!in->reader) {
      std::fprintf(stderr, "%s: error: cannot create reader %s\n", g_cfg.node, sp->topic);
      return 3;
    }
    {
      uint8_t g[16];
      std::memcpy(g, in->reader->guid().guidPrefix.value, 12);
      std::memcpy(g + 12, in->reader->guid().entityId.value, 4);
      char sym[512];
      nt_subscription_symbol(sym, sizeof sym, g_cfg.node, rosmsg_ros_name(sp->type), sp->topic);
      nt_subscription_init(&in->nt, g, sp->topic, sp->depth, sym);
    }
    in->reader->set_listener(in.get());
  }

  auto all_matched = [&](bool report) {
    bool ok = true;
    for (auto& o : outs) {
      PublicationMatchedStatus st;
      o->writer->get_publication_matched_status(st);
      if (st.current_count < o->spec->expect) {
        ok = false;
        if (report) std::fprintf(stderr, "%s: writer %s matched %d of %d readers\n", g_cfg.node, o->spec->topic, st.current_count, o->spec->expect);
      }
    }
    for (auto& in : ins) {
      SubscriptionMatchedStatus st;
      in->reader->get_subscription_matched_status(st);
      if (st.current_count < in->spec->expect) {
        ok = false;
        if (report) std::fprintf(stderr, "%s: reader %s matched %d of %d writers\n", g_cfg.node, in->spec->topic, st.current_count, in->spec->expect);
      }
    }
    return ok;
  };

  int64_t deadline = now_realtime_ns() + static_cast<int64_t>(g_cfg.ready_timeout_s * 1e9);
  while (!all_matched(false)) {
    if (g_stop) break;
    if (now_realtime_ns() > deadline) {
      all_matched(true);
      std::fprintf(stderr, "%s: error: discovery did not complete within %.0f s\n", g_cfg.node, g_cfg.ready_timeout_s);
      truth_close(&g_truth);
      pp->delete_contained_entities();
      DomainParticipantFactory::get_instance()->delete_participant(pp);
      return 4;
    }
    usleep(10000);
  }
  if (!g_stop) {
    std::printf("READY\n");
    std::fflush(stdout);
  }

  char line[256];
  bool started = false;
  while (!g_stop) {
    int k = read_control_line(line, sizeof line, 100);
    if (k < 0) break;
    if (k == 0) continue;
    long long a, b;
    if (!started && std::sscanf(line, "START %lld %lld", &a, &b) == 2) {
      g_t0 = a;
      g_tstop = b;
      started = true;
      for (auto& o : outs)
        if (o->spec->kind == SPEC_PUB) o->th = std::thread(pub_loop, o.get());
    } else if (!std::strcmp(line, "STOP")) {
      break;
    }
  }
  g_stop = 1;
  g_stop_flag = 1;
  int failed = 0;
  for (auto& o : outs) {
    if (o->th.joinable()) o->th.join();
  }
  // stop callbacks before the ground truth is closed
  for (auto& in : ins) in->reader->set_listener(nullptr);
  for (auto& o : outs) {
    std::fprintf(stderr, "%s: published %s %llu samples (%llu failed writes)\n", g_cfg.node, o->spec->topic,
                 static_cast<unsigned long long>(o->published), static_cast<unsigned long long>(o->failed));
    if (o->failed) failed = 1;
  }
  for (auto& in : ins)
    std::fprintf(stderr, "%s: received %s %llu samples\n", g_cfg.node, in->spec->topic,
                 static_cast<unsigned long long>(in->received.load()));
  pp->delete_contained_entities();
  DomainParticipantFactory::get_instance()->delete_participant(pp);
  truth_close(&g_truth);
  for (int i = 0; i < g_cfg.nspecs; i++) rosmsg_free(&g_cfg.specs[i].msg);
  return failed ? 5 : 0;
}
