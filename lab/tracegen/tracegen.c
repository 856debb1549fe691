/*
 * ddslab-tracegen: emits a realistic ros2_tracing event sequence through the
 * `ros2` LTTng-UST provider replica (lab/common/ros2_tp.h), without ROS 2.
 *
 * Each node process (--processes P, forked) does what an rclcpp process with
 * one node does: rcl_init, rcl_node_init, a timer whose callback publishes
 * /raw_image, a subscription to /raw_image whose callback publishes /image
 * (a publish inside a callback on the executor thread: the chain case).
 * The timer callback runs on one thread, the executor on another; each is
 * pinned to its own CPU (--cpus), so the trace has several per-CPU streams.
 * Every --miss-every-th take finds nothing (rmw_take with taken = 0).
 *
 * The publish timestamp (rmw_publish.timestamp in the Jazzy layout) is
 * CLOCK_REALTIME in ns, as rmw_cyclonedds (dds_time()) and rmw_fastrtps
 * (Time_t::now()) take it; the take carries the same value as
 * source_timestamp, as the DDS sample's source timestamp would.
 *
 * Output: one JSON line per node process on stdout with the events it emitted
 * per name (the tests' expected counts).
 *
 * This default mode is kept as it is (the trace crate's oracle tests rely on its
 * counts). `--scenario NAME` runs lab/tracegen/scenario.c instead: scenarios that
 * behave like real ROS 2, with a ground truth (docs/tracing.md).
 */
#define _GNU_SOURCE
#include "ros2_tp.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum ev {
  EV_RCL_INIT, EV_RCL_NODE_INIT, EV_RMW_PUBLISHER_INIT, EV_RCL_PUBLISHER_INIT,
  EV_RCLCPP_PUBLISH, EV_RCL_PUBLISH, EV_RMW_PUBLISH, EV_RMW_SUBSCRIPTION_INIT,
  EV_RCL_SUBSCRIPTION_INIT, EV_RCLCPP_SUBSCRIPTION_INIT, EV_RCLCPP_SUBSCRIPTION_CALLBACK_ADDED,
  EV_RMW_TAKE, EV_RCL_TAKE, EV_RCLCPP_TAKE, EV_RCL_TIMER_INIT, EV_RCLCPP_TIMER_CALLBACK_ADDED,
  EV_RCLCPP_TIMER_LINK_NODE, EV_RCLCPP_CALLBACK_REGISTER, EV_CALLBACK_START, EV_CALLBACK_END,
  EV_COUNT
};
static const char *EV_NAMES[EV_COUNT] = {
  "rcl_init", "rcl_node_init", "rmw_publisher_init", "rcl_publisher_init",
  "rclcpp_publish", "rcl_publish", "rmw_publish", "rmw_subscription_init",
  "rcl_subscription_init", "rclcpp_subscription_init", "rclcpp_subscription_callback_added",
  "rmw_take", "rcl_take", "rclcpp_take", "rcl_timer_init", "rclcpp_timer_callback_added",
  "rclcpp_timer_link_node", "rclcpp_callback_register", "callback_start", "callback_end",
};

struct options {
  const char *distro;
  const char *lib_dir;
  uint64_t messages;
  int processes;
  int cpus;
  uint64_t miss_every;
  uint64_t rate_hz;
};

/* Opaque objects whose addresses serve as handles, as in a real process. */
struct entity { uint64_t pad[4]; };

struct endpoint {
  struct entity rcl, rmw, rclcpp;
  uint8_t gid[ROS2TP_GID_SIZE];
};

#define RING 1024
struct sample { const void *msg; int64_t ts; };

struct node_proc {
  struct options opt;
  int index;
  struct ros2tp_api api;
  struct entity context, node, rmw_node, timer, timer_cb, sub_cb;
  struct endpoint pub_raw, pub_image, sub_raw;
  uint64_t msg_pool[2][16][8];
  struct sample ring[RING];
  _Atomic uint64_t head, tail;
  uint64_t counts[2][EV_COUNT]; /* [0] main + timer thread, [1] executor thread */
};

static int64_t now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pin(int cpu, int cpus) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1) return;
  int n = cpus < online ? cpus : (int)online;
  if (n < 1) n = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % n, &set);
  sched_setaffinity(0, sizeof set, &set);
}

/* A Cyclone-style GUID in the first 16 bytes (prefix 12 + entity id 4), zeros after. */
static void make_gid(uint8_t *gid, int proc, uint8_t entity_key, uint8_t kind) {
  memset(gid, 0, ROS2TP_GID_SIZE);
  uint32_t pid = (uint32_t)getpid();
  gid[0] = 0x01; gid[1] = 0x10; gid[2] = 0xd0; gid[3] = (uint8_t)proc;
  gid[4] = (uint8_t)(pid >> 24); gid[5] = (uint8_t)(pid >> 16);
  gid[6] = (uint8_t)(pid >> 8); gid[7] = (uint8_t)pid;
  gid[8] = 0; gid[9] = 0; gid[10] = 0; gid[11] = 0x01;
  gid[12] = 0; gid[13] = 0; gid[14] = entity_key; gid[15] = kind;
}

static void pace(const struct options *o, uint64_t i, int64_t start) {
  if (!o->rate_hz) return;
  int64_t due = start + (int64_t)(i * 1000000000ull / o->rate_hz);
  int64_t now = now_realtime_ns();
  if (due > now) {
    struct timespec ts = {(due - now) / 1000000000, (due - now) % 1000000000};
    nanosleep(&ts, NULL);
  }
}

static void *timer_thread(void *arg) {
  struct node_proc *np = arg;
  struct ros2tp_api *t = &np->api;
  uint64_t *c = np->counts[0];
  char name[16];
  snprintf(name, sizeof name, "tg%d-timer", np->index);
  prctl(PR_SET_NAME, name);
  pin(np->index * 2, np->opt.cpus);
  int64_t start = now_realtime_ns();
  for (uint64_t i = 0; i < np->opt.messages; i++) {
    pace(&np->opt, i, start);
    const void *msg = np->msg_pool[0][i % 16];
    t->callback_start(&np->timer_cb, 0); c[EV_CALLBACK_START]++;
    t->rclcpp_publish(&np->pub_raw.rcl, msg); c[EV_RCLCPP_PUBLISH]++;
    t->rcl_publish(&np->pub_raw.rcl, msg); c[EV_RCL_PUBLISH]++;
    int64_t ts = now_realtime_ns();
    t->rmw_publish(&np->pub_raw.rmw, msg, ts); c[EV_RMW_PUBLISH]++;
    t->callback_end(&np->timer_cb); c[EV_CALLBACK_END]++;
    /* hand the sample to the executor thread (the "delivery") */
    uint64_t h = atomic_load_explicit(&np->head, memory_order_relaxed);
    while (h - atomic_load_explicit(&np->tail, memory_order_acquire) >= RING) sched_yield();
    np->ring[h % RING] = (struct sample){msg, ts};
    atomic_store_explicit(&np->head, h + 1, memory_order_release);
  }
  return NULL;
}

static void *executor_thread(void *arg) {
  struct node_proc *np = arg;
  struct ros2tp_api *t = &np->api;
  uint64_t *c = np->counts[1];
  char name[16];
  snprintf(name, sizeof name, "tg%d-exec", np->index);
  prctl(PR_SET_NAME, name);
  pin(np->index * 2 + 1, np->opt.cpus);
  for (uint64_t i = 0; i < np->opt.messages; i++) {
    uint64_t tl = atomic_load_explicit(&np->tail, memory_order_relaxed);
    while (atomic_load_explicit(&np->head, memory_order_acquire) == tl) sched_yield();
    struct sample s = np->ring[tl % RING];
    atomic_store_explicit(&np->tail, tl + 1, memory_order_release);
    const void *taken_msg = np->msg_pool[1][i % 16];
    if (np->opt.miss_every && i % np->opt.miss_every == 0) {
      /* the executor woke up but the middleware had nothing yet */
      t->rmw_take(&np->sub_raw.rmw, taken_msg, 0, 0); c[EV_RMW_TAKE]++;
    }
    t->rmw_take(&np->sub_raw.rmw, taken_msg, s.ts, 1); c[EV_RMW_TAKE]++;
    t->rcl_take(taken_msg); c[EV_RCL_TAKE]++;
    t->rclcpp_take(taken_msg); c[EV_RCLCPP_TAKE]++;
    t->callback_start(&np->sub_cb, 0); c[EV_CALLBACK_START]++;
    const void *out = np->msg_pool[0][(i + 8) % 16];
    t->rclcpp_publish(&np->pub_image.rcl, out); c[EV_RCLCPP_PUBLISH]++;
    t->rcl_publish(&np->pub_image.rcl, out); c[EV_RCL_PUBLISH]++;
    t->rmw_publish(&np->pub_image.rmw, out, now_realtime_ns()); c[EV_RMW_PUBLISH]++;
    t->callback_end(&np->sub_cb); c[EV_CALLBACK_END]++;
  }
  return NULL;
}

static int run_node(const struct options *opt, int index) {
  struct node_proc *np = calloc(1, sizeof *np);
  if (!np) { fprintf(stderr, "tracegen: out of memory\n"); return 1; }
  np->opt = *opt;
  np->index = index;
  char err[512];
  if (ros2tp_load(opt->distro, opt->lib_dir, &np->api, err, sizeof err) != 0) {
    fprintf(stderr, "tracegen: %s\n", err);
    free(np);
    return 1;
  }
  char name[16];
  snprintf(name, sizeof name, "tg%d-main", index);
  prctl(PR_SET_NAME, name);
  struct ros2tp_api *t = &np->api;
  uint64_t *c = np->counts[0];
  char node_name[32];
  snprintf(node_name, sizeof node_name, "tg_node_%d", index);
  make_gid(np->pub_raw.gid, index, 1, 0x03);
  make_gid(np->pub_image.gid, index, 2, 0x03);
  make_gid(np->sub_raw.gid, index, 3, 0x04);

  t->rcl_init(&np->context); c[EV_RCL_INIT]++;
  t->rcl_node_init(&np->node, &np->rmw_node, node_name, "/tg"); c[EV_RCL_NODE_INIT]++;
  struct endpoint *pubs[2] = {&np->pub_raw, &np->pub_image};
  const char *topics[2] = {"/raw_image", "/image"};
  for (int k = 0; k < 2; k++) {
    t->rmw_publisher_init(&pubs[k]->rmw, pubs[k]->gid); c[EV_RMW_PUBLISHER_INIT]++;
    t->rcl_publisher_init(&pubs[k]->rcl, &np->node, &pubs[k]->rmw, topics[k], 10);
    c[EV_RCL_PUBLISHER_INIT]++;
  }
  t->rmw_subscription_init(&np->sub_raw.rmw, np->sub_raw.gid); c[EV_RMW_SUBSCRIPTION_INIT]++;
  t->rcl_subscription_init(&np->sub_raw.rcl, &np->node, &np->sub_raw.rmw, "/raw_image", 10);
  c[EV_RCL_SUBSCRIPTION_INIT]++;
  t->rclcpp_subscription_init(&np->sub_raw.rcl, &np->sub_raw.rclcpp);
  c[EV_RCLCPP_SUBSCRIPTION_INIT]++;
  t->rclcpp_subscription_callback_added(&np->sub_raw.rclcpp, &np->sub_cb);
  c[EV_RCLCPP_SUBSCRIPTION_CALLBACK_ADDED]++;
  t->rclcpp_callback_register(&np->sub_cb,
                              "void (*)(std::shared_ptr<sensor_msgs::msg::Image_<std::allocator<void> > const>)");
  c[EV_RCLCPP_CALLBACK_REGISTER]++;
  t->rcl_timer_init(&np->timer, 100000000); c[EV_RCL_TIMER_INIT]++;
  t->rclcpp_timer_callback_added(&np->timer, &np->timer_cb); c[EV_RCLCPP_TIMER_CALLBACK_ADDED]++;
  t->rclcpp_timer_link_node(&np->timer, &np->node); c[EV_RCLCPP_TIMER_LINK_NODE]++;
  t->rclcpp_callback_register(&np->timer_cb, "tg::SensorNode::on_timer()");
  c[EV_RCLCPP_CALLBACK_REGISTER]++;

  pthread_t th_timer, th_exec;
  if (pthread_create(&th_exec, NULL, executor_thread, np) != 0 ||
      pthread_create(&th_timer, NULL, timer_thread, np) != 0) {
    fprintf(stderr, "tracegen: cannot start threads: %s\n", strerror(errno));
    free(np);
    return 1;
  }
  pthread_join(th_timer, NULL);
  pthread_join(th_exec, NULL);

  char line[4096];
  size_t n = (size_t)snprintf(line, sizeof line, "{\"pid\":%d,\"node\":\"%s\",\"distro\":\"%s\",\"events\":{",
                              (int)getpid(), node_name, t->distro);
  uint64_t total = 0;
  for (int e = 0; e < EV_COUNT; e++) {
    uint64_t v = np->counts[0][e] + np->counts[1][e];
    total += v;
    n += (size_t)snprintf(line + n, sizeof line - n, "%s\"%s\":%" PRIu64, e ? "," : "", EV_NAMES[e], v);
  }
  n += (size_t)snprintf(line + n, sizeof line - n, "},\"total\":%" PRIu64 "}\n", total);
  if (write(STDOUT_FILENO, line, n) < 0) { free(np); return 1; }
  free(np);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: ddslab-tracegen --distro humble|jazzy [--messages N] [--processes P]\n"
          "                       [--cpus C] [--miss-every K] [--rate HZ] [--lib-dir DIR]\n"
          "Emits ros2_tracing events (provider ros2) as P rclcpp-like node processes would:\n"
          "each publishes N messages on /raw_image from a timer and republishes each on\n"
          "/image from its subscription callback. 13 events per message plus 15 at start;\n"
          "every K-th take finds nothing (one more rmw_take, taken=0; K=0: never).\n"
          "Threads are pinned to C CPUs (default: all). --rate 0 (default): as fast as possible.\n"
          "With --scenario NAME it runs one of the realistic scenarios instead\n"
          "(ddslab-tracegen --scenario all --help).\n");
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || end == s) return -1;
  *out = v;
  return 0;
}

/* lab/tracegen/scenario.c: --scenario NAME (behaves like real ROS 2, with a ground truth) */
int tracegen_scenario_main(int argc, char **argv);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--scenario")) return tracegen_scenario_main(argc, argv);
  struct options opt = {.distro = NULL, .messages = 1000, .processes = 1,
                        .cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), .miss_every = 10};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    if (!v) { fprintf(stderr, "tracegen: %s needs a value\n", a); usage(stderr); return 2; }
    i++;
    if (!strcmp(a, "--distro")) opt.distro = v;
    else if (!strcmp(a, "--lib-dir")) opt.lib_dir = v;
    else if (parse_u64(v, &n) != 0) { fprintf(stderr, "tracegen: %s: '%s' is not a number\n", a, v); return 2; }
    else if (!strcmp(a, "--messages")) opt.messages = n;
    else if (!strcmp(a, "--processes") && n >= 1 && n <= 64) opt.processes = (int)n;
    else if (!strcmp(a, "--cpus") && n >= 1) opt.cpus = (int)n;
    else if (!strcmp(a, "--miss-every")) opt.miss_every = n;
    else if (!strcmp(a, "--rate")) opt.rate_hz = n;
    else { fprintf(stderr, "tracegen: bad option %s %s\n", a, v); usage(stderr); return 2; }
  }
  if (!opt.distro) { fprintf(stderr, "tracegen: --distro is required\n"); usage(stderr); return 2; }
  if (opt.cpus < 1) opt.cpus = 1;
  if (opt.processes == 1) return run_node(&opt, 0);
  /* Fork before loading the provider: each child registers it itself. */
  pid_t kids[64];
  for (int p = 0; p < opt.processes; p++) {
    pid_t pid = fork();
    if (pid < 0) { fprintf(stderr, "tracegen: fork: %s\n", strerror(errno)); return 1; }
    if (pid == 0) _exit(run_node(&opt, p));
    kids[p] = pid;
  }
  int rc = 0;
  for (int p = 0; p < opt.processes; p++) {
    int st;
    if (waitpid(kids[p], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  return rc;
}
