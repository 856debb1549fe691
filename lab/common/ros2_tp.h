/*
 * A replica of ros2_tracing's LTTng-UST tracepoint provider `ros2`
 * (tracetools/include/tracetools/tp_call.h), so the lab and the tests can
 * write real ros2_tracing traces without ROS 2. Event names, field names,
 * field types and field order follow upstream exactly; docs/tracing.md cites
 * the versions followed.
 *
 * Two layouts, chosen when the provider library is compiled:
 *   ROS2_TP_JAZZY=0  Humble (tracetools 4.1.x): rmw_publish = { message }
 *   ROS2_TP_JAZZY=1  Jazzy  (tracetools 8.x):   rmw_publish = { rmw_publisher_handle,
 *                                                message, timestamp },
 *                    plus rclcpp_intra_publish and the intra-process buffer events
 *                    (rclcpp_ipb_to_subscription, rclcpp_buffer_to_ipb,
 *                    rclcpp_construct_ring_buffer, rclcpp_ring_buffer_enqueue/_dequeue/_clear)
 * The two layouts cannot live in one process (same provider name), so each is
 * built as its own shared library (libddslab-ros2tp-humble.so,
 * libddslab-ros2tp-jazzy.so). Programs call the `ros2tp_api` below, which
 * ros2tp_load() fills from the library of the distro chosen at run time.
 *
 * This header has two parts:
 *  - the program-side API (always), and
 *  - the LTTng event definitions (only when ROS2_TP_PROVIDER_IMPL is defined,
 *    i.e. when compiling the provider library itself).
 */
#ifndef DDSLAB_ROS2_TP_API_H
#define DDSLAB_ROS2_TP_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ros2_tracing's TRACETOOLS_GID_STORAGE_SIZE (24 in Humble and Jazzy). */
#define ROS2TP_GID_SIZE 24u

/*
 * One function per tracepoint. Arguments are the union of what the layouts
 * record; a layout ignores what it does not record (Humble's rmw_publish
 * records only `message`).
 */
struct ros2tp_api {
  const char *distro;  /* "humble" or "jazzy" */
  void (*rcl_init)(const void *context_handle);
  void (*rcl_node_init)(const void *node_handle, const void *rmw_handle, const char *node_name,
                        const char *node_namespace);
  void (*rmw_publisher_init)(const void *rmw_publisher_handle, const uint8_t *gid);
  void (*rcl_publisher_init)(const void *publisher_handle, const void *node_handle,
                             const void *rmw_publisher_handle, const char *topic_name,
                             size_t queue_depth);
  void (*rclcpp_publish)(const void *publisher_handle, const void *message);
  void (*rcl_publish)(const void *publisher_handle, const void *message);
  void (*rmw_publish)(const void *rmw_publisher_handle, const void *message, int64_t timestamp);
  void (*rmw_subscription_init)(const void *rmw_subscription_handle, const uint8_t *gid);
  void (*rcl_subscription_init)(const void *subscription_handle, const void *node_handle,
                                const void *rmw_subscription_handle, const char *topic_name,
                                size_t queue_depth);
  void (*rclcpp_subscription_init)(const void *subscription_handle, const void *subscription);
  void (*rclcpp_subscription_callback_added)(const void *subscription, const void *callback);
  void (*rmw_take)(const void *rmw_subscription_handle, const void *message,
                   int64_t source_timestamp, int taken);
  void (*rcl_take)(const void *message);
  void (*rclcpp_take)(const void *message);
  void (*rcl_timer_init)(const void *timer_handle, int64_t period);
  void (*rclcpp_timer_callback_added)(const void *timer_handle, const void *callback);
  void (*rclcpp_timer_link_node)(const void *timer_handle, const void *node_handle);
  void (*rclcpp_callback_register)(const void *callback, const char *symbol);
  void (*callback_start)(const void *callback, int is_intra_process);
  void (*callback_end)(const void *callback);
  /* services, clients, lifecycle and executor (Humble and Jazzy) */
  void (*rcl_service_init)(const void *service_handle, const void *node_handle,
                           const void *rmw_service_handle, const char *service_name);
  void (*rclcpp_service_callback_added)(const void *service_handle, const void *callback);
  void (*rcl_client_init)(const void *client_handle, const void *node_handle,
                          const void *rmw_client_handle, const char *service_name);
  void (*rcl_lifecycle_state_machine_init)(const void *node_handle, const void *state_machine);
  void (*rcl_lifecycle_transition)(const void *state_machine, const char *start_label,
                                   const char *goal_label);
  void (*rclcpp_executor_get_next_ready)(void);
  void (*rclcpp_executor_wait_for_work)(int64_t timeout);
  void (*rclcpp_executor_execute)(const void *handle);
  /*
   * Intra-process publish and buffers: Jazzy only. The Humble layout has no such events
   * (rclcpp Humble's intra-process path is not instrumented); its library exports these
   * functions as no-ops so that the API is the same for both layouts.
   */
  void (*rclcpp_intra_publish)(const void *publisher_handle, const void *message);
  void (*rclcpp_ipb_to_subscription)(const void *ipb, const void *subscription);
  void (*rclcpp_buffer_to_ipb)(const void *buffer, const void *ipb);
  void (*rclcpp_construct_ring_buffer)(const void *buffer, uint64_t capacity);
  void (*rclcpp_ring_buffer_enqueue)(const void *buffer, uint64_t index, uint64_t size,
                                     int overwritten);
  void (*rclcpp_ring_buffer_dequeue)(const void *buffer, uint64_t index, uint64_t size);
  void (*rclcpp_ring_buffer_clear)(const void *buffer);
};

/*
 * Loads the provider library of `distro` ("humble" or "jazzy") from `lib_dir`
 * (NULL: the directory of the running executable) and fills `api`.
 * Returns 0, or -1 with a one-line reason in `err`.
 */
int ros2tp_load(const char *distro, const char *lib_dir, struct ros2tp_api *api, char *err,
                size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* DDSLAB_ROS2_TP_API_H */

#ifdef ROS2_TP_PROVIDER_IMPL

#ifndef ROS2_TP_JAZZY
#error "define ROS2_TP_JAZZY to 0 (Humble layout) or 1 (Jazzy layout)"
#endif

#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER ros2

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "ros2_tp.h"

#if !defined(DDSLAB_ROS2_TP_EVENTS_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define DDSLAB_ROS2_TP_EVENTS_H

#include <lttng/tracepoint.h>
#include <stdbool.h>

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_init,
  TP_ARGS(const void *, context_handle_arg, const char *, version_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, context_handle, context_handle_arg)
    ctf_string(version, version_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_node_init,
  TP_ARGS(const void *, node_handle_arg, const void *, rmw_handle_arg, const char *, node_name_arg,
          const char *, namespace_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, rmw_handle, rmw_handle_arg)
    ctf_string(node_name, node_name_arg)
    ctf_string(namespace, namespace_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rmw_publisher_init,
  TP_ARGS(const void *, rmw_publisher_handle_arg, const uint8_t *, gid_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, rmw_publisher_handle, rmw_publisher_handle_arg)
    ctf_array(uint8_t, gid, gid_arg, ROS2TP_GID_SIZE)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_publisher_init,
  TP_ARGS(const void *, publisher_handle_arg, const void *, node_handle_arg, const void *,
          rmw_publisher_handle_arg, const char *, topic_name_arg, const size_t, queue_depth_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, publisher_handle, publisher_handle_arg)
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, rmw_publisher_handle, rmw_publisher_handle_arg)
    ctf_string(topic_name, topic_name_arg)
    ctf_integer(const size_t, queue_depth, queue_depth_arg)))

/* Upstream takes the publisher handle as an argument but records only the message. */
TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_publish,
  TP_ARGS(const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, message, message_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_publish,
  TP_ARGS(const void *, publisher_handle_arg, const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, publisher_handle, publisher_handle_arg)
    ctf_integer_hex(const void *, message, message_arg)))

#if ROS2_TP_JAZZY
TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rmw_publish,
  TP_ARGS(const void *, rmw_publisher_handle_arg, const void *, message_arg, int64_t,
          timestamp_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, rmw_publisher_handle, rmw_publisher_handle_arg)
    ctf_integer_hex(const void *, message, message_arg)
    ctf_integer(int64_t, timestamp, timestamp_arg)))
#else
TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rmw_publish,
  TP_ARGS(const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, message, message_arg)))
#endif

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rmw_subscription_init,
  TP_ARGS(const void *, rmw_subscription_handle_arg, const uint8_t *, gid_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, rmw_subscription_handle, rmw_subscription_handle_arg)
    ctf_array(uint8_t, gid, gid_arg, ROS2TP_GID_SIZE)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_subscription_init,
  TP_ARGS(const void *, subscription_handle_arg, const void *, node_handle_arg, const void *,
          rmw_subscription_handle_arg, const char *, topic_name_arg, const size_t,
          queue_depth_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, subscription_handle, subscription_handle_arg)
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, rmw_subscription_handle, rmw_subscription_handle_arg)
    ctf_string(topic_name, topic_name_arg)
    ctf_integer(const size_t, queue_depth, queue_depth_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_subscription_init,
  TP_ARGS(const void *, subscription_handle_arg, const void *, subscription_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, subscription_handle, subscription_handle_arg)
    ctf_integer_hex(const void *, subscription, subscription_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_subscription_callback_added,
  TP_ARGS(const void *, subscription_arg, const void *, callback_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, subscription, subscription_arg)
    ctf_integer_hex(const void *, callback, callback_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rmw_take,
  TP_ARGS(const void *, rmw_subscription_handle_arg, const void *, message_arg, int64_t,
          source_timestamp_arg, const bool, taken_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, rmw_subscription_handle, rmw_subscription_handle_arg)
    ctf_integer_hex(const void *, message, message_arg)
    ctf_integer(int64_t, source_timestamp, source_timestamp_arg)
    ctf_integer(int, taken, (taken_arg ? 1 : 0))))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_take,
  TP_ARGS(const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, message, message_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_take,
  TP_ARGS(const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, message, message_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_timer_init,
  TP_ARGS(const void *, timer_handle_arg, int64_t, period_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, timer_handle, timer_handle_arg)
    ctf_integer(int64_t, period, period_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_timer_callback_added,
  TP_ARGS(const void *, timer_handle_arg, const void *, callback_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, timer_handle, timer_handle_arg)
    ctf_integer_hex(const void *, callback, callback_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_timer_link_node,
  TP_ARGS(const void *, timer_handle_arg, const void *, node_handle_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, timer_handle, timer_handle_arg)
    ctf_integer_hex(const void *, node_handle, node_handle_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_callback_register,
  TP_ARGS(const void *, callback_arg, const char *, symbol_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, callback, callback_arg)
    ctf_string(symbol, symbol_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, callback_start,
  TP_ARGS(const void *, callback_arg, const bool, is_intra_process_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, callback, callback_arg)
    ctf_integer(int, is_intra_process, (is_intra_process_arg ? 1 : 0))))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, callback_end,
  TP_ARGS(const void *, callback_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, callback, callback_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_service_init,
  TP_ARGS(const void *, service_handle_arg, const void *, node_handle_arg, const void *,
          rmw_service_handle_arg, const char *, service_name_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, service_handle, service_handle_arg)
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, rmw_service_handle, rmw_service_handle_arg)
    ctf_string(service_name, service_name_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_service_callback_added,
  TP_ARGS(const void *, service_handle_arg, const void *, callback_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, service_handle, service_handle_arg)
    ctf_integer_hex(const void *, callback, callback_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_client_init,
  TP_ARGS(const void *, client_handle_arg, const void *, node_handle_arg, const void *,
          rmw_client_handle_arg, const char *, service_name_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, client_handle, client_handle_arg)
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, rmw_client_handle, rmw_client_handle_arg)
    ctf_string(service_name, service_name_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_lifecycle_state_machine_init,
  TP_ARGS(const void *, node_handle_arg, const void *, state_machine_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, node_handle, node_handle_arg)
    ctf_integer_hex(const void *, state_machine, state_machine_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rcl_lifecycle_transition,
  TP_ARGS(const void *, state_machine_arg, const char *, start_label_arg, const char *,
          goal_label_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, state_machine, state_machine_arg)
    ctf_string(start_label, start_label_arg)
    ctf_string(goal_label, goal_label_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_executor_get_next_ready,
  TP_ARGS(),
  TP_FIELDS())

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_executor_wait_for_work,
  TP_ARGS(const int64_t, timeout_arg),
  TP_FIELDS(
    ctf_integer(int64_t, timeout, timeout_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_executor_execute,
  TP_ARGS(const void *, handle_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, handle, handle_arg)))

#if ROS2_TP_JAZZY
/* Jazzy only (tracetools 8.x): intra-process publish and the intra-process buffers. */
TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_intra_publish,
  TP_ARGS(const void *, publisher_handle_arg, const void *, message_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, publisher_handle, publisher_handle_arg)
    ctf_integer_hex(const void *, message, message_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_ipb_to_subscription,
  TP_ARGS(const void *, ipb_arg, const void *, subscription_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, ipb, ipb_arg)
    ctf_integer_hex(const void *, subscription, subscription_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_buffer_to_ipb,
  TP_ARGS(const void *, buffer_arg, const void *, ipb_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, buffer, buffer_arg)
    ctf_integer_hex(const void *, ipb, ipb_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_construct_ring_buffer,
  TP_ARGS(const void *, buffer_arg, const uint64_t, capacity_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, buffer, buffer_arg)
    ctf_integer(const uint64_t, capacity, capacity_arg)))

/*
 * `index` is declared ctf_integer(const uint64_t *, ...) upstream, as here: LTTng-UST
 * describes it exactly like a uint64_t (64 bits, unsigned, base 10, 8-byte aligned).
 */
TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_ring_buffer_enqueue,
  TP_ARGS(const void *, buffer_arg, const uint64_t, index_arg, const uint64_t, size_arg,
          const bool, overwritten_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, buffer, buffer_arg)
    ctf_integer(const uint64_t *, index, index_arg)
    ctf_integer(const uint64_t, size, size_arg)
    ctf_integer(const int, overwritten, (overwritten_arg ? 1 : 0))))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_ring_buffer_dequeue,
  TP_ARGS(const void *, buffer_arg, const uint64_t, index_arg, const uint64_t, size_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, buffer, buffer_arg)
    ctf_integer(const uint64_t, index, index_arg)
    ctf_integer(const uint64_t, size, size_arg)))

TRACEPOINT_EVENT(
  TRACEPOINT_PROVIDER, rclcpp_ring_buffer_clear,
  TP_ARGS(const void *, buffer_arg),
  TP_FIELDS(
    ctf_integer_hex(const void *, buffer, buffer_arg)))
#endif

#endif /* DDSLAB_ROS2_TP_EVENTS_H */

#include <lttng/tracepoint-event.h>

#endif /* ROS2_TP_PROVIDER_IMPL */
