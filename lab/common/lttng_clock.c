/*
 * libddslab-lttng-clock.so: the LTTng-UST clock plugin of the lab's traced
 * nodes (LTTNG_UST_CLOCK_PLUGIN, lttng-ust(3) "clock override").
 *
 * It is LTTng's own default clock — the read, frequency, UUID, name and
 * description callbacks lttng-ust uses when no plugin is loaded, taken with
 * lttng_ust_trace_clock_get_*_cb() and installed unchanged — so a trace
 * recorded with it is the trace LTTng would record anyway (CLOCK_MONOTONIC,
 * 1 GHz, "monotonic", the boot UUID). The one addition: every reading is also
 * kept per thread, so a node can write into its ground truth the exact time
 * stamp of the event it has just emitted (lab/common/nodetrace.h). Reading
 * CLOCK_MONOTONIC next to the tracepoint instead is 0.1 to 17 us off on a
 * loaded 2-core VM (the tracepoint's path before and after LTTng's own
 * reading runs cold between samples; docs/lab.md).
 */
#define _GNU_SOURCE
#include <lttng/ust-clock.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

static lttng_ust_clock_read64_function default_read64;
static int active;

/* initial-exec: no allocation on a thread's first access (lttng-ust does the same for its own TLS) */
static __thread uint64_t last_value __attribute__((tls_model("initial-exec")));
static __thread uint64_t reads __attribute__((tls_model("initial-exec")));

static uint64_t read64_and_keep(void) {
  uint64_t v = default_read64();
  last_value = v;
  reads++;
  return v;
}

/* The last value this thread's clock readings gave LTTng. */
EXPORT uint64_t ddslab_lttng_clock_last(void) { return last_value; }

/* How many readings this thread made (a tracepoint that records an event makes at least one). */
EXPORT uint64_t ddslab_lttng_clock_reads(void) { return reads; }

/* 1 once lttng-ust uses this clock. */
EXPORT int ddslab_lttng_clock_active(void) { return active; }

/* Called by lttng-ust when it loads the plugin, before any event is recorded. */
EXPORT void lttng_ust_clock_plugin_init(void) {
  lttng_ust_clock_freq_function freq;
  lttng_ust_clock_uuid_function uuid;
  lttng_ust_clock_name_function name;
  lttng_ust_clock_description_function description;
  if (lttng_ust_trace_clock_get_read64_cb(&default_read64) || lttng_ust_trace_clock_get_freq_cb(&freq) ||
      lttng_ust_trace_clock_get_uuid_cb(&uuid) || lttng_ust_trace_clock_get_name_cb(&name) ||
      lttng_ust_trace_clock_get_description_cb(&description))
    return; /* the default clock stays; the nodes notice (ddslab_lttng_clock_reads stays 0) */
  if (lttng_ust_trace_clock_set_read64_cb(read64_and_keep) || lttng_ust_trace_clock_set_freq_cb(freq) ||
      lttng_ust_trace_clock_set_uuid_cb(uuid) || lttng_ust_trace_clock_set_name_cb(name) ||
      lttng_ust_trace_clock_set_description_cb(description))
    return;
  active = lttng_ust_enable_trace_clock_override() == 0;
}
