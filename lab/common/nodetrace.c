#define _GNU_SOURCE
#include "nodetrace.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nt_on = 0;
struct ros2tp_api nt_api;
uint64_t (*nt_clock_last)(void);
uint64_t (*nt_clock_reads)(void);

/* The process-wide objects of one rclcpp process with one node. */
static nt_object g_context, g_node, g_rmw_node;

int nt_init(const char *distro, char *err, size_t err_len) {
  nt_on = 0;
  if (!distro || !distro[0]) return 0;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
  if (!slash) {
    snprintf(err, err_len, "cannot find the directory of the running executable");
    return -1;
  }
  *slash = '\0';
  char plugin[PATH_MAX + 32];
  snprintf(plugin, sizeof plugin, "%s/libddslab-lttng-clock.so", exe);
  if (access(plugin, R_OK) != 0) {
    snprintf(err, err_len, "%s not found (built with the provider when lttng-ust is installed)", plugin);
    return -1;
  }
  /* lttng-ust reads it when it loads, i.e. with the provider below */
  setenv("LTTNG_UST_CLOCK_PLUGIN", plugin, 1);
  if (ros2tp_load(distro, NULL, &nt_api, err, err_len) != 0) return -1;
  void *h = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
  int (*active)(void) = NULL;
  if (h) {
    *(void **)(&nt_clock_last) = dlsym(h, "ddslab_lttng_clock_last");
    *(void **)(&nt_clock_reads) = dlsym(h, "ddslab_lttng_clock_reads");
    *(void **)(&active) = dlsym(h, "ddslab_lttng_clock_active");
  }
  if (!h || !nt_clock_last || !nt_clock_reads || !active || !active()) {
    snprintf(err, err_len, "lttng-ust did not take the clock plugin %s", plugin);
    return -1;
  }
  nt_on = 1;
  return 0;
}

void nt_node_init(const char *node_name, const char *node_namespace) {
  if (!nt_on) return;
  nt_api.rcl_init(&g_context);
  nt_api.rcl_node_init(&g_node, &g_rmw_node, node_name, node_namespace);
}

static void gid_of(const uint8_t guid[16], uint8_t gid[ROS2TP_GID_SIZE]) {
  /* rmw_cyclonedds and rmw_fastrtps put the GUID (prefix, entity id) in the
   * first 16 bytes; the rest of the 24 recorded bytes is zero (Humble's gid storage). */
  memset(gid, 0, ROS2TP_GID_SIZE);
  memcpy(gid, guid, 16);
}

void nt_publisher_init(nt_publisher *p, const uint8_t guid[16], const char *topic, int depth) {
  if (!nt_on) return;
  uint8_t gid[ROS2TP_GID_SIZE];
  gid_of(guid, gid);
  /* rcl_publisher_init creates the rmw publisher first (rmw_publisher_init), then records itself */
  nt_api.rmw_publisher_init(&p->rmw, gid);
  nt_api.rcl_publisher_init(&p->rcl, &g_node, &p->rmw, topic, (size_t)depth);
}

void nt_timer_init(nt_publisher *p, int64_t period_ns, const char *symbol) {
  if (!nt_on) return;
  nt_api.rcl_timer_init(&p->timer, period_ns);
  nt_api.rclcpp_timer_callback_added(&p->timer, &p->timer_cb);
  nt_api.rclcpp_timer_link_node(&p->timer, &g_node);
  nt_api.rclcpp_callback_register(&p->timer_cb, symbol);
}

void nt_subscription_init(nt_subscription *s, const uint8_t guid[16], const char *topic, int depth,
                          const char *symbol) {
  if (!nt_on) return;
  uint8_t gid[ROS2TP_GID_SIZE];
  gid_of(guid, gid);
  nt_api.rmw_subscription_init(&s->rmw, gid);
  nt_api.rcl_subscription_init(&s->rcl, &g_node, &s->rmw, topic, (size_t)depth);
  nt_api.rclcpp_subscription_init(&s->rcl, &s->rclcpp);
  nt_api.rclcpp_subscription_callback_added(&s->rclcpp, &s->callback);
  nt_api.rclcpp_callback_register(&s->callback, symbol);
}

void nt_take_nothing(nt_subscription *s, const void *message) {
  if (!nt_on) return;
  /* rmw reports taken = false; rcl_take and rclcpp's take_type_erased record
   * their tracepoints before they look at `taken` */
  nt_api.rmw_take(&s->rmw, message, 0, 0);
  nt_api.rcl_take(message);
  nt_api.rclcpp_take(message);
}

void nt_subscription_symbol(char *out, size_t len, const char *node, const char *ros_type, const char *topic) {
  char cpp[256];
  size_t k = 0;
  for (const char *c = ros_type; *c && k + 3 < sizeof cpp; c++) {
    if (*c == '/') { cpp[k++] = ':'; cpp[k++] = ':'; }
    else cpp[k++] = *c;
  }
  cpp[k] = '\0';
  snprintf(out, len, "void ddslab::%s::on_message(std::shared_ptr<%s const>) [%s]", node, cpp, topic);
}

void nt_timer_symbol(char *out, size_t len, const char *node, const char *topic) {
  snprintf(out, len, "void ddslab::%s::on_timer() [%s]", node, topic);
}
