// ddslab_ros2: one lab workload node as a real ROS 2 node (rclcpp on whichever rmw the lab selects
// with RMW_IMPLEMENTATION: rmw_cyclonedds_cpp, rmw_fastrtps_cpp or rmw_zenoh_cpp), built from the
// real Jazzy sources in ../shared/ros2 (scripts/ros2-build.sh).
//
// The command line and the ground truth are the lab's (lab/common/nodecfg.h, docs/lab.md), plus:
//   --executor single|multi   rclcpp's SingleThreadedExecutor (default) or MultiThreadedExecutor
//   --intra-process           NodeOptions::use_intra_process_comms(true)
//   --timers                  periodic publishers publish from rclcpp wall timers on the executor
//                             (Node::create_wall_timer at the period, created at START; ticks
//                             before its t0 or from its tstop on publish nothing; bursts as the lab's: every burst_every-th
//                             tick publishes burst_count samples, the next burst_count - 1 skip),
//                             not from threads of their own
//   --call SERVICE RATE       calls SERVICE (rcl_interfaces/srv/GetParameters: another node's
//                             /<node>/get_parameters, which every rclcpp node serves) at RATE Hz
//                             from t0 on, through a real rclcpp client (async_send_request, the
//                             response taken by the executor); READY waits for the service
//
// Composable nodes in one process (as a component container runs them, e.g. Autoware's):
//   ddslab-ros2 [--executor single|multi] --component NODE-ARGS... --component NODE-ARGS...
// Each --component starts one node's arguments (the lab's, --intra-process, --timers, --call);
// every node gets its own rclcpp::Node and ground-truth file, all of them one executor and one
// context, so rclcpp's intra-process communication joins the nodes that have it on. READY once
// every node has matched its peers; START and STOP drive them all.
// Typed publishers and subscriptions (rclcpp::Publisher<M>, as users' nodes have them, so rclcpp,
// rcl and the rmw emit every tracepoint they emit for users). Each outgoing sample is the lab's
// exact payload (lab/common/rosmsg.c: the requested serialised size, header.stamp = its time, a
// sample counter in its first large byte array), deserialised into the typed message before the
// publish call, so ROS 2 sends what it would send for that message and nothing else.
//
// Ground truth (what ddscope is checked against, not what it reads):
//   publish: t_ns = CLOCK_REALTIME just before Publisher::publish(); seq = the n-th publish of the
//            publisher (= the writer's RTPS sequence number on DDS; rmw_zenoh's own sequence
//            number); writer_guid = the publisher's rmw gid (= the DDS writer GUID on DDS);
//            stamp_ns = the header.stamp written into the message.
//   receive: t_ns = CLOCK_REALTIME when the subscription callback started; writer_guid = the
//            publisher gid of rmw_message_info; seq = the counter read from the message (types
//            with a byte array), else rmw's publication sequence number where the rmw gives one,
//            else -1 (the lab resolves it from stamp_ns and the publisher's ground truth);
//            source_ts_ns = rmw_message_info's source timestamp.
#include <dds/dds.h>
#include <rcl/publisher.h>
#include <rcl/subscription.h>
#include <rclcpp/rclcpp.hpp>
#include <rclcpp/serialization.hpp>
#include <rmw/rmw.h>

#include <autoware_auto_vehicle_msgs/msg/velocity_report.hpp>
#include <geometry_msgs/msg/accel_with_covariance_stamped.hpp>
#include <geometry_msgs/msg/pose_stamped.hpp>
#include <geometry_msgs/msg/pose_with_covariance_stamped.hpp>
#include <geometry_msgs/msg/twist_with_covariance_stamped.hpp>
#include <rcl_interfaces/srv/get_parameters.hpp>
#include <rosgraph_msgs/msg/clock.hpp>
#include <sensor_msgs/msg/image.hpp>
#include <sensor_msgs/msg/imu.hpp>
#include <sensor_msgs/msg/point_cloud2.hpp>
#include <std_msgs/msg/string.hpp>
#include <std_msgs/msg/u_int8_multi_array.hpp>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "nodecfg.h"
}

namespace {

volatile int g_stop = 0;
int64_t g_t0 = 0, g_tstop = 0;
std::mutex g_pub_mutex;  // a relay and a periodic publisher of one process never share an outlet

void on_signal(int) { g_stop = 1; }

void gid_hex(const uint8_t* g, char out[33]) { guid_hex(g, out); }

// The DDS writer GUID of a publisher and of a received sample's writer. rmw_fastrtps's gids are the
// GUIDs, rmw_zenoh's its own ids (what its attachments carry). rmw_cyclonedds_cpp 2.2 gives instance
// handles instead (rmw_get_gid_for_publisher: the writer's own, message_info.publisher_gid: the
// receiving process's handle of the remote writer; only rmw_publisher_init's trace record holds the
// GUID): the lab asks Cyclone DDS for the GUIDs through the rmw's entity (CddsEntity, its first
// member, in rmw_cyclonedds_cpp 2.2.2 as bundled), so the ground truth names samples as the wire does.
bool is_cyclone() { return std::strcmp(rmw_get_implementation_identifier(), "rmw_cyclonedds_cpp") == 0; }
struct CddsEntityView {
  dds_entity_t enth;
};
void publisher_guid(rclcpp::PublisherBase& pub, char out[33]) {
  if (is_cyclone()) {
    const rmw_publisher_t* h = rcl_publisher_get_rmw_handle(pub.get_publisher_handle().get());
    dds_guid_t g;
    if (h && h->data && dds_get_guid(static_cast<const CddsEntityView*>(h->data)->enth, &g) == DDS_RETCODE_OK) {
      guid_hex(g.v, out);
      return;
    }
  }
  rmw_gid_t gid = pub.get_gid();
  gid_hex(gid.data, out);
}

// What the lab's builder put into a message (lab/common/rosmsg.c): header.stamp (or the leading
// Time), and the sample counter in the first 8 bytes of its first byte array of at least 8 bytes.
int64_t time_ns(const builtin_interfaces::msg::Time& t) { return static_cast<int64_t>(t.sec) * 1000000000LL + t.nanosec; }
int64_t first8(const std::vector<uint8_t>& v) {
  if (v.size() < 8) return -1;
  uint64_t x;
  std::memcpy(&x, v.data(), 8);
  return static_cast<int64_t>(x);
}
template <class M> int64_t stamp_of(const M& m) { return time_ns(m.header.stamp); }
template <> int64_t stamp_of(const std_msgs::msg::UInt8MultiArray&) { return -1; }
template <> int64_t stamp_of(const std_msgs::msg::String&) { return -1; }
template <> int64_t stamp_of(const rosgraph_msgs::msg::Clock& m) { return time_ns(m.clock); }
template <class M> int64_t counter_of(const M&) { return -1; }
template <> int64_t counter_of(const sensor_msgs::msg::Image& m) { return first8(m.data); }
template <> int64_t counter_of(const sensor_msgs::msg::PointCloud2& m) { return first8(m.data); }
template <> int64_t counter_of(const std_msgs::msg::UInt8MultiArray& m) { return first8(m.data); }
template <> int64_t counter_of(const std_msgs::msg::String& m) { return first8(std::vector<uint8_t>(m.data.begin(), m.data.end())); }

// Ground-truth lines of one node (the lab's format, docs/lab.md, with stamp_ns).
void truth_line(truth_log& tl, const char* event, int64_t t_ns, const char* topic, const char* guid, int64_t seq, size_t size, const char* tail) {
  pthread_mutex_lock(&tl.lock);
  std::fprintf(tl.f, "{\"event\":\"%s\",\"t_ns\":%lld,\"host\":\"%s\",\"node\":\"%s\",\"topic\":\"%s\",\"writer_guid\":\"%s\",\"seq\":%lld,\"size\":%zu%s}\n",
               event, static_cast<long long>(t_ns), tl.host, tl.node, topic, guid, static_cast<long long>(seq), size, tail);
  tl.lines++;
  pthread_mutex_unlock(&tl.lock);
}

struct Component;

struct Outlet {
  Component* comp = nullptr;
  node_spec* spec = nullptr;
  // deserialises spec->msg into the typed message, publishes it and writes its ground truth
  std::function<void(const char* src_guid, int64_t src_seq)> publish;
  std::function<size_t()> subscribers;
  char guid[33] = {0};
  uint64_t published = 0;
  uint64_t failed = 0;
  double credit = 0;
  std::thread th;
};

struct Inlet {
  Component* comp = nullptr;
  node_spec* spec = nullptr;
  rclcpp::SubscriptionBase::SharedPtr sub;
  std::map<dds_instance_handle_t, std::string> cyclone_writers;  // publication handle -> GUID (callbacks only)
  std::function<size_t()> publishers;
  std::vector<Outlet*> relays;
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> intra{0};
};

// A periodic service call.
struct Caller {
  std::string service;
  double rate_hz = 0;
  rclcpp::Client<rcl_interfaces::srv::GetParameters>::SharedPtr client;
  std::thread th;
  std::atomic<uint64_t> sent{0}, answered{0};
};

// One node of the process: its lab configuration, ground truth, rclcpp node and endpoints.
struct Component {
  node_config cfg{};
  truth_log truth{};
  bool intra = false, timers = false;
  rclcpp::Node::SharedPtr node;
  std::vector<std::unique_ptr<Outlet>> outs;
  std::vector<std::unique_ptr<Inlet>> ins;
  std::vector<std::unique_ptr<Caller>> callers;
  std::vector<rclcpp::TimerBase::SharedPtr> timers_list;
};

// The process's publishers by topic (filled before any subscription exists): rclcpp's
// intra-process deliveries carry no publisher gid, so the sender of one is the process's
// publisher of its topic.
std::map<std::string, std::vector<Outlet*>> g_outlets_by_topic;

// Publishes the next sample of `o` (a relay's: computed from (src_guid, src_seq)).
void publish_one(Outlet* o, const char* src_guid, int64_t src_seq) {
  std::lock_guard<std::mutex> lock(g_pub_mutex);
  rosmsg* msg = &o->spec->msg;
  rosmsg_set_stamp(msg, now_realtime_ns());
  rosmsg_set_counter(msg, o->published + 1);
  try {
    o->publish(src_guid, src_seq);
  } catch (const std::exception& e) {
    o->failed++;
    std::fprintf(stderr, "%s: publish on %s failed: %s\n", o->comp->cfg.node, o->spec->topic, e.what());
    return;
  }
  o->published++;
}

// One received sample: the callback's start is the receive instant.
void sender_guid(Inlet* in, const rmw_message_info_t& mi, char out[33]) {
  if (is_cyclone() && in->sub) {
    dds_instance_handle_t ih;
    std::memcpy(&ih, mi.publisher_gid.data, sizeof ih);
    auto it = in->cyclone_writers.find(ih);
    if (it == in->cyclone_writers.end()) {
      const rmw_subscription_t* h = rcl_subscription_get_rmw_handle(in->sub->get_subscription_handle().get());
      dds_builtintopic_endpoint_t* ep = h && h->data ? dds_get_matched_publication_data(static_cast<const CddsEntityView*>(h->data)->enth, ih) : nullptr;
      if (ep) {
        char g[33];
        guid_hex(ep->key.v, g);
        dds_builtintopic_free_endpoint(ep);
        it = in->cyclone_writers.emplace(ih, g).first;
      }
    }
    if (it != in->cyclone_writers.end()) {
      std::snprintf(out, 33, "%s", it->second.c_str());
      return;
    }
  }
  gid_hex(mi.publisher_gid.data, out);
}

void on_receive(Inlet* in, int64_t t_rcv, int64_t counter, int64_t stamp, const rclcpp::MessageInfo& info) {
  const rmw_message_info_t& mi = info.get_rmw_message_info();
  char guid[33] = {0};
  const bool intra = mi.from_intra_process;
  if (intra) {
    // rclcpp gives an intra-process delivery a zero gid and no source timestamp
    auto it = g_outlets_by_topic.find(in->spec->topic);
    if (it != g_outlets_by_topic.end() && it->second.size() == 1) std::snprintf(guid, sizeof guid, "%s", it->second[0]->guid);
    else gid_hex(mi.publisher_gid.data, guid);
    in->intra++;
  } else {
    sender_guid(in, mi, guid);
  }
  int64_t seq = counter;
  if (seq < 0 && !intra && mi.publication_sequence_number != RMW_MESSAGE_INFO_SEQUENCE_NUMBER_UNSUPPORTED)
    seq = static_cast<int64_t>(mi.publication_sequence_number);
  in->received++;
  for (Outlet* o : in->relays) {
    o->credit += o->spec->ratio;
    if (o->credit >= 1.0 - 1e-9) {
      o->credit -= 1.0;
      compute_for(relay_compute_ns(o->spec, seq), o->spec->spin);
      publish_one(o, guid, seq);
    }
  }
  char tail[160];
  if (intra) std::snprintf(tail, sizeof tail, ",\"intra_process\":true,\"stamp_ns\":%lld", static_cast<long long>(stamp));
  else std::snprintf(tail, sizeof tail, ",\"source_ts_ns\":%lld,\"stamp_ns\":%lld", static_cast<long long>(mi.source_timestamp), static_cast<long long>(stamp));
  truth_line(in->comp->truth, "receive", t_rcv, in->spec->topic, guid, seq, 0, tail);
}

rclcpp::QoS qos_of(const node_spec* sp) {
  rclcpp::QoS q(rclcpp::KeepLast(static_cast<size_t>(sp->depth)));
  if (sp->reliable) q.reliable(); else q.best_effort();
  q.durability_volatile();
  return q;
}

// The typed publisher and subscription of one message type M.
template <class M>
struct Typed {
  static void make_outlet(rclcpp::Node& node, Outlet* o) {
    auto pub = node.create_publisher<M>(o->spec->topic, qos_of(o->spec));
    auto msg = std::make_shared<M>();
    auto ser = std::make_shared<rclcpp::Serialization<M>>();
    publisher_guid(*pub, o->guid);
    o->subscribers = [pub] { return pub->get_subscription_count() + pub->get_intra_process_subscription_count(); };
    o->publish = [pub, msg, ser, o](const char* src_guid, int64_t src_seq) {
      const rosmsg& m = o->spec->msg;
      rclcpp::SerializedMessage s(m.size);
      auto& r = s.get_rcl_serialized_message();
      std::memcpy(r.buffer, m.buf, m.size);
      r.buffer_length = m.size;
      ser->deserialize_message(&s, msg.get());
      int64_t t = now_realtime_ns();
      pub->publish(*msg);
      char tail[200];
      int n = std::snprintf(tail, sizeof tail, ",\"stamp_ns\":%lld", static_cast<long long>(stamp_of(*msg)));
      if (src_guid)
        std::snprintf(tail + n, sizeof tail - n, ",\"src_writer_guid\":\"%s\",\"src_seq\":%lld", src_guid, static_cast<long long>(src_seq));
      truth_line(o->comp->truth, "publish", t, o->spec->topic, o->guid, static_cast<int64_t>(o->published + 1), m.size, tail);
    };
  }
  static void make_inlet(rclcpp::Node& node, Inlet* in) {
    auto cb = [in](const M& msg, const rclcpp::MessageInfo& info) {
      int64_t t = now_realtime_ns();
      on_receive(in, t, counter_of(msg), stamp_of(msg), info);
    };
    auto sub = node.create_subscription<M>(in->spec->topic, qos_of(in->spec), cb);
    in->publishers = [sub] { return sub->get_publisher_count(); };
    in->sub = sub;
  }
};

using Maker = std::pair<void (*)(rclcpp::Node&, Outlet*), void (*)(rclcpp::Node&, Inlet*)>;
template <class M>
Maker maker() { return {&Typed<M>::make_outlet, &Typed<M>::make_inlet}; }

const std::map<std::string, Maker>& types() {
  static const std::map<std::string, Maker> t = {
      {"sensor_msgs/msg/Image", maker<sensor_msgs::msg::Image>()},
      {"sensor_msgs/msg/PointCloud2", maker<sensor_msgs::msg::PointCloud2>()},
      {"sensor_msgs/msg/Imu", maker<sensor_msgs::msg::Imu>()},
      {"std_msgs/msg/UInt8MultiArray", maker<std_msgs::msg::UInt8MultiArray>()},
      {"std_msgs/msg/String", maker<std_msgs::msg::String>()},
      {"geometry_msgs/msg/PoseStamped", maker<geometry_msgs::msg::PoseStamped>()},
      {"geometry_msgs/msg/PoseWithCovarianceStamped", maker<geometry_msgs::msg::PoseWithCovarianceStamped>()},
      {"geometry_msgs/msg/TwistWithCovarianceStamped", maker<geometry_msgs::msg::TwistWithCovarianceStamped>()},
      {"geometry_msgs/msg/AccelWithCovarianceStamped", maker<geometry_msgs::msg::AccelWithCovarianceStamped>()},
      {"rosgraph_msgs/msg/Clock", maker<rosgraph_msgs::msg::Clock>()},
      {"autoware_auto_vehicle_msgs/msg/VelocityReport", maker<autoware_auto_vehicle_msgs::msg::VelocityReport>()},
  };
  return t;
}

// Runs f(k) at t0 + k / rate_hz while before tstop (CLOCK_REALTIME); f returns the periods its
// call took up (a burst of n samples takes n).
template <class F>
void every_period(double rate_hz, F f) {
  const double period_ns = 1e9 / rate_hz;
  uint64_t k = 0;
  while (!g_stop) {
    int64_t due = g_t0 + static_cast<int64_t>(std::llround(static_cast<double>(k) * period_ns));
    if (due >= g_tstop) break;
    sleep_until_realtime(due, &g_stop);
    if (g_stop) break;
    k += f(k);
  }
}

void pub_loop(Outlet* o) {
  const node_spec* sp = o->spec;
  every_period(sp->rate_hz, [o, sp](uint64_t k) -> uint64_t {
    uint64_t n = 1;
    if (sp->burst_every > 0 && sp->burst_count > 1 && k % sp->burst_every == 0) n = sp->burst_count;
    for (uint64_t i = 0; i < n && !g_stop; i++) publish_one(o, nullptr, -1);
    return n;
  });
}

void call_loop(Caller* c) {
  using Srv = rcl_interfaces::srv::GetParameters;
  every_period(c->rate_hz, [c](uint64_t) -> uint64_t {
    auto req = std::make_shared<Srv::Request>();
    req->names.push_back("use_sim_time");
    c->client->async_send_request(req, [c](rclcpp::Client<Srv>::SharedFuture) { c->answered++; });
    c->sent++;
    return 1;
  });
}

// One timer per periodic publisher: the publish runs inside the timer's callback, on the executor.
rclcpp::TimerBase::SharedPtr pub_timer(rclcpp::Node& node, Outlet* o) {
  const node_spec* sp = o->spec;
  auto period = std::chrono::nanoseconds(std::llround(1e9 / sp->rate_hz));
  auto tick = std::make_shared<uint64_t>(0);
  auto skip = std::make_shared<uint64_t>(0);
  return node.create_wall_timer(period, [o, sp, tick, skip] {
    int64_t now = now_realtime_ns();
    if (g_stop || now < g_t0 || now >= g_tstop) return;
    uint64_t k = (*tick)++;
    if (*skip > 0) {
      (*skip)--;
      return;
    }
    uint64_t n = 1;
    if (sp->burst_every > 0 && sp->burst_count > 1 && k % sp->burst_every == 0) n = sp->burst_count;
    for (uint64_t i = 0; i < n && !g_stop; i++) publish_one(o, nullptr, -1);
    *skip = n - 1;
  });
}

// Parses one node's arguments (argv[0] is the program): the lab's and this node's own. Returns 0,
// 1 (exit 0: --help) or 2 (a usage error, said on stderr).
int parse_component(Component& c, std::vector<char*> argv) {
  std::vector<char*> args;
  for (size_t i = 0; i < argv.size(); i++) {
    if (!std::strcmp(argv[i], "--intra-process")) {
      c.intra = true;
    } else if (!std::strcmp(argv[i], "--timers")) {
      c.timers = true;
    } else if (!std::strcmp(argv[i], "--call") && i + 2 < argv.size()) {
      auto k = std::make_unique<Caller>();
      k->service = argv[i + 1];
      k->rate_hz = std::atof(argv[i + 2]);
      if (!(k->rate_hz > 0)) {
        std::fprintf(stderr, "error: --call %s: the rate must be above 0 Hz, not %s\n", argv[i + 1], argv[i + 2]);
        return 2;
      }
      c.callers.push_back(std::move(k));
      i += 2;
    } else {
      args.push_back(argv[i]);
    }
  }
  int rc = nodecfg_parse(&c.cfg, static_cast<int>(args.size()), args.data());
  if (rc != 0) return rc < 0 ? 2 : 1;
  for (int i = 0; i < c.cfg.nspecs; i++) {
    if (!types().count(c.cfg.specs[i].type_name)) {
      std::fprintf(stderr, "%s: error: type %s is not one this node publishes (", c.cfg.node, c.cfg.specs[i].type_name);
      const char* sep = "";
      for (auto& kv : types()) { std::fprintf(stderr, "%s%s", sep, kv.first.c_str()); sep = ", "; }
      std::fprintf(stderr, ")\n");
      return 2;
    }
  }
  if (nodecfg_build(&c.cfg) != 0) return 2;
  return 0;
}

// The node's rclcpp::Node, publishers, subscriptions and clients (subscriptions once every
// component's publishers exist: see g_outlets_by_topic).
void make_publishers(Component& c) {
  c.node = std::make_shared<rclcpp::Node>(c.cfg.node, rclcpp::NodeOptions().use_intra_process_comms(c.intra));
  for (int i = 0; i < c.cfg.nspecs; i++) {
    node_spec* sp = &c.cfg.specs[i];
    if (sp->kind == SPEC_SUB) {
      auto in = std::make_unique<Inlet>();
      in->comp = &c;
      in->spec = sp;
      c.ins.push_back(std::move(in));
    } else {
      auto o = std::make_unique<Outlet>();
      o->comp = &c;
      o->spec = sp;
      types().at(sp->type_name).first(*c.node, o.get());
      std::fprintf(stderr, "%s: publisher %s type %s %zu bytes gid %s\n", c.cfg.node, sp->topic, sp->type_name, sp->msg.size, o->guid);
      g_outlets_by_topic[sp->topic].push_back(o.get());
      c.outs.push_back(std::move(o));
    }
  }
  // relays attach to their input before its subscription exists, so no sample misses them
  for (auto& o : c.outs) {
    if (o->spec->kind != SPEC_RELAY) continue;
    for (auto& in : c.ins)
      if (!std::strcmp(in->spec->topic, o->spec->input)) { in->relays.push_back(o.get()); break; }
  }
}

void make_subscriptions(Component& c) {
  for (auto& in : c.ins) types().at(in->spec->type_name).second(*c.node, in.get());
  for (auto& k : c.callers) k->client = c.node->create_client<rcl_interfaces::srv::GetParameters>(k->service);
}

bool all_matched(const Component& c, bool report) {
  bool ok = true;
  for (auto& o : c.outs)
    if (o->subscribers() < static_cast<size_t>(o->spec->expect)) {
      ok = false;
      if (report) std::fprintf(stderr, "%s: publisher %s matched %zu of %d subscriptions\n", c.cfg.node, o->spec->topic, o->subscribers(), o->spec->expect);
    }
  for (auto& in : c.ins)
    if (in->publishers() < static_cast<size_t>(in->spec->expect)) {
      ok = false;
      if (report) std::fprintf(stderr, "%s: subscription %s matched %zu of %d publishers\n", c.cfg.node, in->spec->topic, in->publishers(), in->spec->expect);
    }
  for (auto& k : c.callers)
    if (!k->client->service_is_ready()) {
      ok = false;
      if (report) std::fprintf(stderr, "%s: service %s is not ready\n", c.cfg.node, k->service.c_str());
    }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Process options, then one argument list per node: the whole command line is one node's
  // unless --component starts each.
  bool multi = false;
  std::vector<std::vector<char*>> groups;
  bool components = false;
  for (int i = 1; i < argc; i++)
    if (!std::strcmp(argv[i], "--component")) components = true;
  if (!components) groups.push_back({argv[0]});
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--executor") && i + 1 < argc) {
      if (!std::strcmp(argv[i + 1], "multi")) multi = true;
      else if (std::strcmp(argv[i + 1], "single") != 0) {
        std::fprintf(stderr, "error: --executor must be single or multi, not %s\n", argv[i + 1]);
        return 2;
      }
      i++;
    } else if (!std::strcmp(argv[i], "--version")) {
      std::printf("ddslab-ros2 rclcpp-jazzy %s\n", std::getenv("RMW_IMPLEMENTATION") ? std::getenv("RMW_IMPLEMENTATION") : "rmw-default");
      return 0;
    } else if (!std::strcmp(argv[i], "--component")) {
      groups.push_back({argv[0]});
    } else if (groups.empty()) {
      std::fprintf(stderr, "error: %s before the first --component (only --executor is the process's)\n", argv[i]);
      return 2;
    } else {
      groups.back().push_back(argv[i]);
    }
  }
  std::vector<std::unique_ptr<Component>> comps;
  bool check_only = false;
  for (auto& g : groups) {
    auto c = std::make_unique<Component>();
    int rc = parse_component(*c, g);
    if (rc == 1) return 0;
    if (rc != 0) return rc;
    check_only = check_only || c->cfg.check_only;
    for (auto& other : comps) {
      if (!std::strcmp(other->cfg.node, c->cfg.node)) {
        std::fprintf(stderr, "error: two components named %s\n", c->cfg.node);
        return 2;
      }
      if (other->cfg.domain != c->cfg.domain) {
        std::fprintf(stderr, "error: components %s and %s on domains %d and %d: one process, one ROS_DOMAIN_ID\n", other->cfg.node, c->cfg.node, other->cfg.domain, c->cfg.domain);
        return 2;
      }
    }
    comps.push_back(std::move(c));
  }
  if (check_only) return 0;
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  for (auto& c : comps) {
    if (truth_open(&c->truth, c->cfg.truth, c->cfg.host, c->cfg.node) != 0) {
      std::fprintf(stderr, "%s: error: cannot write %s\n", c->cfg.node, c->cfg.truth);
      return 2;
    }
  }
  // ROS 2 gets no arguments of ours; the domain is the lab's.
  char domain[16];
  std::snprintf(domain, sizeof domain, "%d", comps[0]->cfg.domain);
  setenv("ROS_DOMAIN_ID", domain, 1);
  rclcpp::InitOptions init;
  init.shutdown_on_signal = false;
  const char* ros_argv[] = {argv[0]};
  rclcpp::init(1, ros_argv, init);
  for (auto& c : comps) make_publishers(*c);
  for (auto& c : comps) make_subscriptions(*c);

  std::shared_ptr<rclcpp::Executor> exec;
  if (multi) exec = std::make_shared<rclcpp::executors::MultiThreadedExecutor>();
  else exec = std::make_shared<rclcpp::executors::SingleThreadedExecutor>();
  for (auto& c : comps) exec->add_node(c->node);
  std::thread spinner([&] { exec->spin(); });

  auto everything_matched = [&](bool report) {
    bool ok = true;
    for (auto& c : comps) ok = all_matched(*c, report) && ok;
    return ok;
  };
  int code = 0;
  double ready_timeout_s = 0;
  for (auto& c : comps) ready_timeout_s = std::max(ready_timeout_s, c->cfg.ready_timeout_s);
  int64_t deadline = now_realtime_ns() + static_cast<int64_t>(ready_timeout_s * 1e9);
  while (!everything_matched(false) && !g_stop) {
    if (now_realtime_ns() > deadline) {
      everything_matched(true);
      std::fprintf(stderr, "%s: error: discovery did not complete within %.0f s\n", comps[0]->cfg.node, ready_timeout_s);
      code = 4;
      g_stop = 1;
      break;
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
      for (auto& c : comps) {
        for (auto& k : c->callers) k->th = std::thread(call_loop, k.get());
        for (auto& o : c->outs) {
          if (o->spec->kind != SPEC_PUB) continue;
          if (c->timers) c->timers_list.push_back(pub_timer(*c->node, o.get()));
          else o->th = std::thread(pub_loop, o.get());
        }
      }
    } else if (!std::strcmp(line, "STOP")) {
      break;
    }
  }
  g_stop = 1;
  for (auto& c : comps) {
    for (auto& o : c->outs)
      if (o->th.joinable()) o->th.join();
    for (auto& k : c->callers)
      if (k->th.joinable()) k->th.join();
  }
  // the last calls' responses (the executor takes them), for a second at most
  for (int i = 0; i < 100; i++) {
    bool all = true;
    for (auto& c : comps)
      for (auto& k : c->callers) all = all && k->answered.load() >= k->sent.load();
    if (all) break;
    usleep(10000);
  }
  for (auto& c : comps)
    for (auto& t : c->timers_list) t->cancel();
  exec->cancel();
  spinner.join();
  for (auto& c : comps) {
    c->timers_list.clear();
    for (auto& o : c->outs) {
      std::fprintf(stderr, "%s: published %s %" PRIu64 " samples (%" PRIu64 " failed)\n", c->cfg.node, o->spec->topic, o->published, o->failed);
      if (o->failed) code = code ? code : 5;
    }
    for (auto& in : c->ins)
      std::fprintf(stderr, "%s: received %s %" PRIu64 " samples (%" PRIu64 " intra-process)\n", c->cfg.node, in->spec->topic, in->received.load(), in->intra.load());
    for (auto& k : c->callers)
      std::fprintf(stderr, "%s: called %s %" PRIu64 " times (%" PRIu64 " answered)\n", c->cfg.node, k->service.c_str(), k->sent.load(), k->answered.load());
  }
  for (auto& c : comps) {
    c->callers.clear();
    c->ins.clear();
    c->outs.clear();
    c->node.reset();
  }
  exec.reset();
  rclcpp::shutdown();
  for (auto& c : comps) truth_close(&c->truth);
  return code;
}
