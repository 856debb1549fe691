/*
 * Compiled twice (see lab/CMakeLists.txt):
 *  - with ROS2_TP_PROVIDER_IMPL and ROS2_TP_JAZZY=0|1: the LTTng-UST probe
 *    provider `ros2` in that layout plus the exported `ros2tp_impl_*`
 *    functions that fire its tracepoints (one shared library per layout);
 *  - without: ros2tp_load(), which dlopens the library of the chosen layout.
 */
#define _GNU_SOURCE
#ifdef ROS2_TP_PROVIDER_IMPL

#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "ros2_tp.h"

#if ROS2_TP_JAZZY
/* tracetools 8.x writes TRACETOOLS_VERSION_STR into rcl_init.version. */
#define ROS2TP_DISTRO "jazzy"
#define ROS2TP_TRACETOOLS_VERSION "8.2.4"
#else
#define ROS2TP_DISTRO "humble"
#define ROS2TP_TRACETOOLS_VERSION "4.1.1"
#endif

#define EXPORT __attribute__((visibility("default")))

EXPORT const char *ros2tp_impl_distro(void) { return ROS2TP_DISTRO; }

EXPORT void ros2tp_impl_rcl_init(const void *context_handle) {
  tracepoint(ros2, rcl_init, context_handle, ROS2TP_TRACETOOLS_VERSION);
}

EXPORT void ros2tp_impl_rcl_node_init(const void *node_handle, const void *rmw_handle,
                                      const char *node_name, const char *node_namespace) {
  tracepoint(ros2, rcl_node_init, node_handle, rmw_handle, node_name, node_namespace);
}

EXPORT void ros2tp_impl_rmw_publisher_init(const void *rmw_publisher_handle, const uint8_t *gid) {
  tracepoint(ros2, rmw_publisher_init, rmw_publisher_handle, gid);
}

EXPORT void ros2tp_impl_rcl_publisher_init(const void *publisher_handle, const void *node_handle,
                                           const void *rmw_publisher_handle,
                                           const char *topic_name, size_t queue_depth) {
  tracepoint(ros2, rcl_publisher_init, publisher_handle, node_handle, rmw_publisher_handle,
             topic_name, queue_depth);
}

EXPORT void ros2tp_impl_rclcpp_publish(const void *publisher_handle, const void *message) {
  (void)publisher_handle; /* upstream does not record it either */
  tracepoint(ros2, rclcpp_publish, message);
}

EXPORT void ros2tp_impl_rcl_publish(const void *publisher_handle, const void *message) {
  tracepoint(ros2, rcl_publish, publisher_handle, message);
}

EXPORT void ros2tp_impl_rmw_publish(const void *rmw_publisher_handle, const void *message,
                                    int64_t timestamp) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rmw_publish, rmw_publisher_handle, message, timestamp);
#else
  (void)rmw_publisher_handle;
  (void)timestamp;
  tracepoint(ros2, rmw_publish, message);
#endif
}

EXPORT void ros2tp_impl_rmw_subscription_init(const void *rmw_subscription_handle,
                                              const uint8_t *gid) {
  tracepoint(ros2, rmw_subscription_init, rmw_subscription_handle, gid);
}

EXPORT void ros2tp_impl_rcl_subscription_init(const void *subscription_handle,
                                              const void *node_handle,
                                              const void *rmw_subscription_handle,
                                              const char *topic_name, size_t queue_depth) {
  tracepoint(ros2, rcl_subscription_init, subscription_handle, node_handle,
             rmw_subscription_handle, topic_name, queue_depth);
}

EXPORT void ros2tp_impl_rclcpp_subscription_init(const void *subscription_handle,
                                                 const void *subscription) {
  tracepoint(ros2, rclcpp_subscription_init, subscription_handle, subscription);
}

EXPORT void ros2tp_impl_rclcpp_subscription_callback_added(const void *subscription,
                                                           const void *callback) {
  tracepoint(ros2, rclcpp_subscription_callback_added, subscription, callback);
}

EXPORT void ros2tp_impl_rmw_take(const void *rmw_subscription_handle, const void *message,
                                 int64_t source_timestamp, int taken) {
  tracepoint(ros2, rmw_take, rmw_subscription_handle, message, source_timestamp, taken != 0);
}

EXPORT void ros2tp_impl_rcl_take(const void *message) { tracepoint(ros2, rcl_take, message); }

EXPORT void ros2tp_impl_rclcpp_take(const void *message) {
  tracepoint(ros2, rclcpp_take, message);
}

EXPORT void ros2tp_impl_rcl_timer_init(const void *timer_handle, int64_t period) {
  tracepoint(ros2, rcl_timer_init, timer_handle, period);
}

EXPORT void ros2tp_impl_rclcpp_timer_callback_added(const void *timer_handle,
                                                    const void *callback) {
  tracepoint(ros2, rclcpp_timer_callback_added, timer_handle, callback);
}

EXPORT void ros2tp_impl_rclcpp_timer_link_node(const void *timer_handle, const void *node_handle) {
  tracepoint(ros2, rclcpp_timer_link_node, timer_handle, node_handle);
}

EXPORT void ros2tp_impl_rclcpp_callback_register(const void *callback, const char *symbol) {
  tracepoint(ros2, rclcpp_callback_register, callback, symbol);
}

EXPORT void ros2tp_impl_callback_start(const void *callback, int is_intra_process) {
  tracepoint(ros2, callback_start, callback, is_intra_process != 0);
}

EXPORT void ros2tp_impl_callback_end(const void *callback) {
  tracepoint(ros2, callback_end, callback);
}

EXPORT void ros2tp_impl_rcl_service_init(const void *service_handle, const void *node_handle,
                                         const void *rmw_service_handle,
                                         const char *service_name) {
  tracepoint(ros2, rcl_service_init, service_handle, node_handle, rmw_service_handle,
             service_name);
}

EXPORT void ros2tp_impl_rclcpp_service_callback_added(const void *service_handle,
                                                      const void *callback) {
  tracepoint(ros2, rclcpp_service_callback_added, service_handle, callback);
}

EXPORT void ros2tp_impl_rcl_client_init(const void *client_handle, const void *node_handle,
                                        const void *rmw_client_handle, const char *service_name) {
  tracepoint(ros2, rcl_client_init, client_handle, node_handle, rmw_client_handle, service_name);
}

EXPORT void ros2tp_impl_rcl_lifecycle_state_machine_init(const void *node_handle,
                                                         const void *state_machine) {
  tracepoint(ros2, rcl_lifecycle_state_machine_init, node_handle, state_machine);
}

EXPORT void ros2tp_impl_rcl_lifecycle_transition(const void *state_machine,
                                                 const char *start_label,
                                                 const char *goal_label) {
  tracepoint(ros2, rcl_lifecycle_transition, state_machine, start_label, goal_label);
}

EXPORT void ros2tp_impl_rclcpp_executor_get_next_ready(void) {
  tracepoint(ros2, rclcpp_executor_get_next_ready);
}

EXPORT void ros2tp_impl_rclcpp_executor_wait_for_work(int64_t timeout) {
  tracepoint(ros2, rclcpp_executor_wait_for_work, timeout);
}

EXPORT void ros2tp_impl_rclcpp_executor_execute(const void *handle) {
  tracepoint(ros2, rclcpp_executor_execute, handle);
}

/* Jazzy only; no-ops in the Humble layout (no such events in tracetools 4.1.x). */
EXPORT void ros2tp_impl_rclcpp_intra_publish(const void *publisher_handle, const void *message) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_intra_publish, publisher_handle, message);
#else
  (void)publisher_handle;
  (void)message;
#endif
}

EXPORT void ros2tp_impl_rclcpp_ipb_to_subscription(const void *ipb, const void *subscription) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_ipb_to_subscription, ipb, subscription);
#else
  (void)ipb;
  (void)subscription;
#endif
}

EXPORT void ros2tp_impl_rclcpp_buffer_to_ipb(const void *buffer, const void *ipb) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_buffer_to_ipb, buffer, ipb);
#else
  (void)buffer;
  (void)ipb;
#endif
}

EXPORT void ros2tp_impl_rclcpp_construct_ring_buffer(const void *buffer, uint64_t capacity) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_construct_ring_buffer, buffer, capacity);
#else
  (void)buffer;
  (void)capacity;
#endif
}

EXPORT void ros2tp_impl_rclcpp_ring_buffer_enqueue(const void *buffer, uint64_t index,
                                                   uint64_t size, int overwritten) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_ring_buffer_enqueue, buffer, index, size, overwritten != 0);
#else
  (void)buffer;
  (void)index;
  (void)size;
  (void)overwritten;
#endif
}

EXPORT void ros2tp_impl_rclcpp_ring_buffer_dequeue(const void *buffer, uint64_t index,
                                                   uint64_t size) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_ring_buffer_dequeue, buffer, index, size);
#else
  (void)buffer;
  (void)index;
  (void)size;
#endif
}

EXPORT void ros2tp_impl_rclcpp_ring_buffer_clear(const void *buffer) {
#if ROS2_TP_JAZZY
  tracepoint(ros2, rclcpp_ring_buffer_clear, buffer);
#else
  (void)buffer;
#endif
}

#else /* the loader */

#include "ros2_tp.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int exe_dir(char *out, size_t len) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *slash = strrchr(buf, '/');
  if (!slash) return -1;
  *slash = '\0';
  if ((size_t)snprintf(out, len, "%s", buf) >= len) return -1;
  return 0;
}

#define LOAD(field, sym)                                                                   \
  do {                                                                                     \
    *(void **)(&api->field) = dlsym(handle, "ros2tp_impl_" sym);                           \
    if (!api->field) {                                                                     \
      snprintf(err, err_len, "%s: missing symbol ros2tp_impl_%s", path, sym);              \
      return -1;                                                                           \
    }                                                                                      \
  } while (0)

int ros2tp_load(const char *distro, const char *lib_dir, struct ros2tp_api *api, char *err,
                size_t err_len) {
  if (strcmp(distro, "humble") != 0 && strcmp(distro, "jazzy") != 0) {
    snprintf(err, err_len, "unknown ROS 2 distro '%s' (humble or jazzy)", distro);
    return -1;
  }
  char dir[PATH_MAX];
  if (lib_dir) {
    snprintf(dir, sizeof dir, "%s", lib_dir);
  } else if (exe_dir(dir, sizeof dir) != 0) {
    snprintf(err, err_len, "cannot find the directory of the running executable");
    return -1;
  }
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/libddslab-ros2tp-%s.so", dir, distro);
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    snprintf(err, err_len, "cannot load %s: %s", path, dlerror());
    return -1;
  }
  const char *(*distro_fn)(void);
  *(void **)(&distro_fn) = dlsym(handle, "ros2tp_impl_distro");
  if (!distro_fn || strcmp(distro_fn(), distro) != 0) {
    snprintf(err, err_len, "%s is not the %s provider", path, distro);
    return -1;
  }
  api->distro = distro_fn();
  LOAD(rcl_init, "rcl_init");
  LOAD(rcl_node_init, "rcl_node_init");
  LOAD(rmw_publisher_init, "rmw_publisher_init");
  LOAD(rcl_publisher_init, "rcl_publisher_init");
  LOAD(rclcpp_publish, "rclcpp_publish");
  LOAD(rcl_publish, "rcl_publish");
  LOAD(rmw_publish, "rmw_publish");
  LOAD(rmw_subscription_init, "rmw_subscription_init");
  LOAD(rcl_subscription_init, "rcl_subscription_init");
  LOAD(rclcpp_subscription_init, "rclcpp_subscription_init");
  LOAD(rclcpp_subscription_callback_added, "rclcpp_subscription_callback_added");
  LOAD(rmw_take, "rmw_take");
  LOAD(rcl_take, "rcl_take");
  LOAD(rclcpp_take, "rclcpp_take");
  LOAD(rcl_timer_init, "rcl_timer_init");
  LOAD(rclcpp_timer_callback_added, "rclcpp_timer_callback_added");
  LOAD(rclcpp_timer_link_node, "rclcpp_timer_link_node");
  LOAD(rclcpp_callback_register, "rclcpp_callback_register");
  LOAD(callback_start, "callback_start");
  LOAD(callback_end, "callback_end");
  LOAD(rcl_service_init, "rcl_service_init");
  LOAD(rclcpp_service_callback_added, "rclcpp_service_callback_added");
  LOAD(rcl_client_init, "rcl_client_init");
  LOAD(rcl_lifecycle_state_machine_init, "rcl_lifecycle_state_machine_init");
  LOAD(rcl_lifecycle_transition, "rcl_lifecycle_transition");
  LOAD(rclcpp_executor_get_next_ready, "rclcpp_executor_get_next_ready");
  LOAD(rclcpp_executor_wait_for_work, "rclcpp_executor_wait_for_work");
  LOAD(rclcpp_executor_execute, "rclcpp_executor_execute");
  LOAD(rclcpp_intra_publish, "rclcpp_intra_publish");
  LOAD(rclcpp_ipb_to_subscription, "rclcpp_ipb_to_subscription");
  LOAD(rclcpp_buffer_to_ipb, "rclcpp_buffer_to_ipb");
  LOAD(rclcpp_construct_ring_buffer, "rclcpp_construct_ring_buffer");
  LOAD(rclcpp_ring_buffer_enqueue, "rclcpp_ring_buffer_enqueue");
  LOAD(rclcpp_ring_buffer_dequeue, "rclcpp_ring_buffer_dequeue");
  LOAD(rclcpp_ring_buffer_clear, "rclcpp_ring_buffer_clear");
  return 0;
}

#endif
