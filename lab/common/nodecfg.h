/* Command line of the lab's workload nodes (shared by the Cyclone DDS and the
 * Fast DDS node) and the ground-truth writer.
 *
 *   ddslab-cyclone --node NAME --host HOST --truth FILE [--content pattern|zeros|random] [--domain N]
 *                  [--pub SPEC]... [--sub SPEC]... [--relay SPEC]... [--check] [--ready-timeout S]
 *                  [--tracing humble|jazzy]
 *   ddslab-cyclone --version | --list-types
 *
 * SPEC is a comma-separated key=value list:
 *   --pub   topic=/image,type=sensor_msgs/msg/Image,bytes=2764852,rate=10,reliability=reliable,depth=10,readers=1
 *   --sub   topic=/image,type=sensor_msgs/msg/Image,reliability=reliable,depth=10,writers=1
 *   --relay input=/raw_image,topic=/image,type=...,bytes=...,ratio=1,delay_ns=10000000,compute=sleep,
 *           reliability=reliable,depth=10,readers=1
 * readers / writers: how many matches to wait for before reporting READY.
 *
 * --tracing: emit ros2_tracing's tracepoints in that distro's layout (lab/common/nodetrace.h)
 * and record their instants in the ground truth.
 *
 * Protocol on stdin/stdout (driven by `ddscope lab`):
 *   node -> "READY"                      once every writer and reader has matched its peers
 *   lab  -> "START <t0_ns> <tstop_ns>"   periodic publishers send at t0 + k/rate while < tstop (CLOCK_REALTIME)
 *   lab  -> "STOP" (or EOF, SIGTERM)     flush the ground truth and exit 0
 */
#ifndef DDSLAB_NODECFG_H
#define DDSLAB_NODECFG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rosmsg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NODECFG_MAX 64

typedef enum { SPEC_PUB, SPEC_SUB, SPEC_RELAY } spec_kind;

typedef struct {
  spec_kind kind;
  char topic[256];          /* ROS name, "/image" */
  char dds_topic[260];      /* "rt/image" */
  char type_name[160];
  const rosmsg_type *type;
  size_t bytes;             /* serialised size (pub, relay) */
  double rate_hz;           /* pub */
  uint64_t burst_every;     /* pub: every burst_every-th period, publish burst_count samples back to back */
  uint64_t burst_count;     /*      and skip the next burst_count - 1 periods (the mean rate stays) */
  int reliable;             /* 1 = RELIABLE (ROS 2 default), 0 = BEST_EFFORT */
  int depth;                /* KEEP_LAST depth */
  int expect;               /* readers (pub, relay) or writers (sub) to match before READY */
  /* relay */
  char input[256];
  double ratio;             /* forward this fraction of input samples (credit counter) */
  int64_t delay_ns;         /* compute time before the output is published */
  int spin;                 /* compute by busy-waiting instead of sleeping */
  uint64_t slow_every;      /* input samples with sn % slow_every == 0 compute slow_ns instead (0: none) */
  int64_t slow_ns;
  int domain;               /* relay: DDS domain of the output (-1: the node's --domain) */
  /* built message */
  rosmsg msg;
} node_spec;

typedef struct {
  char node[128];
  char host[128];
  char truth[1024];
  char iface_ip[64];        /* Fast DDS: address of the host interface to bind to */
  int domain;               /* DDS domain id (ROS_DOMAIN_ID) */
  rosmsg_content content;
  int check_only;
  double ready_timeout_s;
  char tracing[16];         /* "" (off), "humble" or "jazzy" */
  int nspecs;
  node_spec specs[NODECFG_MAX];
} node_config;

/* Parses argv; on error prints one line to stderr and returns -1.
 * Returns 1 if the caller should just exit 0 (--help, --list-types). */
int nodecfg_parse(node_config *cfg, int argc, char **argv);
/* Builds every outgoing message at its exact size; one-line error and -1 if impossible. */
int nodecfg_build(node_config *cfg);

/* Current CLOCK_REALTIME in ns. */
int64_t now_realtime_ns(void);
/* Current CLOCK_MONOTONIC in ns (the clock LTTng stamps events with). */
int64_t now_monotonic_ns(void);

/* One instant on both clocks: CLOCK_REALTIME first, then CLOCK_MONOTONIC, so
 * that the monotonic reading is the one closest to what follows it (a tracepoint). */
typedef struct {
  int64_t rt_ns, mono_ns;
} instant_ns;
instant_ns now_instant(void);
/* The calling thread's id (what LTTng records as vtid outside a pid namespace). */
int64_t current_tid(void);
/* Sleeps until the absolute CLOCK_REALTIME time t_ns (returns early if *stop becomes set). */
void sleep_until_realtime(int64_t t_ns, volatile int *stop);
/* Computes for d ns: sleeping (default) or spinning on the CPU. */
void compute_for(int64_t d_ns, int spin);
/* The compute time of a relay for the input sample numbered sn (the injected slow samples, docs/lab.md). */
int64_t relay_compute_ns(const node_spec *sp, int64_t sn);

/* Ground truth: one JSON line per published or received sample. */
typedef struct {
  FILE *f;
  pthread_mutex_t lock;
  char host[128], node[128];
  uint64_t lines;
} truth_log;

/* With tracing, the instants of the tracepoints a sample went through (docs/lab.md). */
typedef struct {
  instant_ns rclcpp_publish, rmw_publish; /* rmw_publish.rt_ns is the source timestamp */
  int64_t tid;
} truth_pub_trace;
typedef struct {
  instant_ns rmw_take, callback_start, callback_end;
  int64_t tid;
} truth_recv_trace;

int truth_open(truth_log *t, const char *path, const char *host, const char *node);
/* `tr` NULL: tracing off, only the base fields. */
void truth_publish(truth_log *t, int64_t t_ns, const char *topic, const char *writer_guid, int64_t seq, size_t size,
                   const char *src_writer_guid, int64_t src_seq, const truth_pub_trace *tr);
void truth_receive(truth_log *t, int64_t t_ns, const char *topic, const char *writer_guid, int64_t seq, size_t size,
                   int64_t source_ts_ns, const truth_recv_trace *tr);
void truth_close(truth_log *t);

/* 16 GUID bytes -> 32 lowercase hex chars + NUL. */
void guid_hex(const uint8_t g[16], char out[33]);

/* Reads one control line from stdin with a timeout; returns 1 line read, 0 timeout, -1 EOF. */
int read_control_line(char *buf, size_t cap, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
