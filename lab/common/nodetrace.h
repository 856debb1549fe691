/* The ROS 2 layer of the lab's workload nodes: ros2_tracing's tracepoints,
 * fired through the `ros2` provider replica (ros2_tp.h) with the meaning
 * rclcpp / rcl / rmw_cyclonedds / rmw_fastrtps give them on a real robot
 * (docs/lab.md, "Tracing"):
 *
 *   start        rcl_init, rcl_node_init, per publisher rmw_publisher_init (gid =
 *                the DDS writer GUID) + rcl_publisher_init, per periodic publisher
 *                its timer (rcl_timer_init, rclcpp_timer_callback_added,
 *                rclcpp_timer_link_node, rclcpp_callback_register), per
 *                subscription rmw_subscription_init (gid = reader GUID),
 *                rcl_subscription_init, rclcpp_subscription_init,
 *                rclcpp_subscription_callback_added, rclcpp_callback_register
 *   publish      rclcpp_publish -> rcl_publish -> rmw_publish (Jazzy: timestamp =
 *                the source timestamp written with the sample, the INFO_TS)
 *   take         rmw_take (source_timestamp, taken) -> rcl_take -> rclcpp_take ->
 *                callback_start -> [the callback: a relay publishes here] ->
 *                callback_end, all on the thread that runs the callback; a take
 *                that finds no valid sample records rmw_take(taken = 0),
 *                rcl_take and rclcpp_take and no callback, as rclcpp does
 *
 * Tracing is off unless nt_init() loaded a provider: then every function here
 * returns at once and the nodes behave exactly as without this layer. */
#ifndef DDSLAB_NODETRACE_H
#define DDSLAB_NODETRACE_H

#include <stddef.h>
#include <stdint.h>

#include "nodecfg.h"
#include "ros2_tp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An object whose address is a handle in the trace, as the rcl / rmw / rclcpp
 * objects of a real process are. */
typedef struct {
  uint64_t opaque[2];
} nt_object;

typedef struct {
  nt_object rcl;       /* rcl_publisher_t */
  nt_object rmw;       /* rmw_publisher_t */
  nt_object timer;     /* rcl_timer_t of a periodic publisher */
  nt_object timer_cb;  /* its rclcpp callback */
} nt_publisher;

typedef struct {
  nt_object rcl;       /* rcl_subscription_t */
  nt_object rmw;       /* rmw_subscription_t */
  nt_object rclcpp;    /* rclcpp::SubscriptionBase */
  nt_object callback;  /* its AnySubscriptionCallback */
} nt_subscription;

/* 1 once a provider is loaded. */
extern int nt_on;
/* The clock plugin's view of this thread's readings (lttng_clock.c); set when nt_on. */
extern uint64_t (*nt_clock_last)(void);
extern uint64_t (*nt_clock_reads)(void);

/* Instants of a tracepoint (ground truth): CLOCK_REALTIME read right before
 * it, and CLOCK_MONOTONIC = the time stamp LTTng gave the event (the reading
 * the clock plugin kept), or a reading right after it if LTTng recorded
 * nothing (no active session). */
static inline uint64_t nt_clock_mark(void) { return nt_clock_reads(); }
static inline int64_t nt_event_mono(uint64_t mark) {
  return nt_clock_reads() != mark ? (int64_t)nt_clock_last() : now_monotonic_ns();
}
#define NT_TRACE(instant, call)            \
  do {                                     \
    uint64_t nt_mark_ = nt_clock_mark();   \
    (instant).rt_ns = now_realtime_ns();   \
    call;                                  \
    (instant).mono_ns = nt_event_mono(nt_mark_); \
  } while (0)
/* The loaded provider (valid only when nt_on). */
extern struct ros2tp_api nt_api;

/* Loads the provider of `distro` ("humble" or "jazzy") from the directory of
 * the executable, with the clock plugin libddslab-lttng-clock.so from there
 * (LTTNG_UST_CLOCK_PLUGIN); NULL or "" leaves tracing off. One-line reason in
 * err on failure. */
int nt_init(const char *distro, char *err, size_t err_len);

/* rcl_init and rcl_node_init of the process's one node. */
void nt_node_init(const char *node_name, const char *node_namespace);

/* rmw_publisher_init (gid: the 16 GUID bytes, then zeros) and rcl_publisher_init. */
void nt_publisher_init(nt_publisher *p, const uint8_t guid[16], const char *topic, int depth);

/* The timer that drives a periodic publisher. */
void nt_timer_init(nt_publisher *p, int64_t period_ns, const char *symbol);

/* rmw_subscription_init, rcl_subscription_init, rclcpp_subscription_init,
 * rclcpp_subscription_callback_added and rclcpp_callback_register. */
void nt_subscription_init(nt_subscription *s, const uint8_t guid[16], const char *topic, int depth,
                          const char *symbol);

/* rclcpp_callback_register symbols of the nodes' callbacks, demangled C++ as
 * rclcpp records them: "void ddslab::NODE::on_message(std::shared_ptr<pkg::msg::T const>) [TOPIC]"
 * and "void ddslab::NODE::on_timer() [TOPIC]". */
void nt_subscription_symbol(char *out, size_t len, const char *node, const char *ros_type, const char *topic);
void nt_timer_symbol(char *out, size_t len, const char *node, const char *topic);

/* An empty take: rmw_take(taken = 0), rcl_take, rclcpp_take; no callback. */
void nt_take_nothing(nt_subscription *s, const void *message);

#ifdef __cplusplus
}
#endif
#endif
