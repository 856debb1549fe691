/*
 * libddslab-warpclock.so: a host's clock as the lab's scenario warps it (docs/lab.md, "Clocks that
 * disagree"). The lab's hosts are network namespaces of one kernel and share its clocks; a real
 * unsynchronised host differs by an offset, a drift (its quartz, ppm) and now and then a step (NTP
 * stepping CLOCK_REALTIME). Preloaded (LD_PRELOAD) into every process the lab starts on a warped
 * host, this library makes the time those processes read — the DDS stacks' source timestamps,
 * LTTng's trace clock, the nodes' ground truth — read as that host's clock would; the lab rewrites
 * the host's capture time stamps with the same function (crates/lab/src/clockwarp.rs).
 *
 * DDSLAB_CLOCK_WARP="OFFSET_NS,DRIFT_PPB,STEP_NS,STEP_AT_NS,REF_NS" (REF_NS, STEP_AT_NS: true
 * CLOCK_REALTIME). For a true CLOCK_REALTIME reading t:
 *     w(t) = t + OFFSET + (t - REF) * DRIFT / 1e9 + (t >= STEP_AT ? STEP : 0)
 * CLOCK_MONOTONIC (and its RAW, COARSE and BOOTTIME variants) runs at the same warped rate but never
 * steps, as on a real host: m' = m + (m - m_REF) * DRIFT / 1e9, m_REF the monotonic reading at REF.
 * So realtime - monotonic keeps the offset (and, after STEP_AT, the step), which is what LTTng
 * measures once at a session's start: a trace keeps counting through a realtime step.
 *
 * Intercepted: clock_gettime, gettimeofday, time, timespec_get (what glibc, libstdc++'s
 * std::chrono clocks, Python's time module and lttng-ust call), and absolute clock_nanosleep (the
 * kernel waits for the true instant a warped target corresponds to). Timed waits on condition
 * variables are not translated: the DDS stacks and Zenoh time them on the monotonic clock, which
 * only drifts. The vDSO is not bypassed for
 * programs that call it directly (none of the lab's do).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static clock_nanosleep_fn real_clock_nanosleep;
static int64_t offset_ns, drift_ppb, step_ns, step_at_ns, ref_ns, mono_ref_ns;
static int enabled;

static int64_t ts_ns(const struct timespec *ts) { return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec; }

static void set_ts(struct timespec *ts, int64_t ns) {
  ts->tv_sec = (time_t)(ns / 1000000000LL);
  ts->tv_nsec = (long)(ns % 1000000000LL);
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000L;
    ts->tv_sec -= 1;
  }
}

/* (x * drift_ppb) / 1e9 without overflow for |x| up to ~292 years and |drift| up to 1e6 ppb. */
static int64_t scaled(int64_t x) { return (int64_t)((__int128)x * drift_ppb / 1000000000LL); }

static int64_t warp_realtime(int64_t t) {
  int64_t w = t + offset_ns + scaled(t - ref_ns);
  if (t >= step_at_ns) w += step_ns;
  return w;
}

static int64_t warp_monotonic(int64_t m) { return m + scaled(m - mono_ref_ns); }

/* The inverses (for absolute sleeps, which the kernel counts on the true clock). */
static int64_t unscaled(int64_t x) { return (int64_t)((__int128)x * 1000000000LL / (1000000000LL + drift_ppb)); }

static int64_t unwarp_realtime(int64_t x) {
  if (step_ns != 0) {
    int64_t after = ref_ns + unscaled(x - ref_ns - offset_ns - step_ns);
    if (after >= step_at_ns) return after;
  }
  return ref_ns + unscaled(x - ref_ns - offset_ns);
}

static int64_t unwarp_monotonic(int64_t x) { return mono_ref_ns + unscaled(x - mono_ref_ns); }

__attribute__((constructor)) static void warpclock_init(void) {
  real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  real_clock_nanosleep = (clock_nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
  const char *spec = getenv("DDSLAB_CLOCK_WARP");
  if (!real_clock_gettime || !spec) return;
  long long o, d, s, sa, r;
  if (sscanf(spec, "%lld,%lld,%lld,%lld,%lld", &o, &d, &s, &sa, &r) != 5) {
    fprintf(stderr, "libddslab-warpclock: DDSLAB_CLOCK_WARP=%s is not OFFSET_NS,DRIFT_PPB,STEP_NS,STEP_AT_NS,REF_NS\n", spec);
    exit(70);
  }
  offset_ns = o, drift_ppb = d, step_ns = s, step_at_ns = sa, ref_ns = r;
  /* monotonic at REF: now's monotonic less how far realtime has moved since REF */
  struct timespec rt, mono;
  real_clock_gettime(CLOCK_REALTIME, &rt);
  real_clock_gettime(CLOCK_MONOTONIC, &mono);
  mono_ref_ns = ts_ns(&mono) - (ts_ns(&rt) - ref_ns);
  enabled = 1;
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts) {
  if (!real_clock_gettime) real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  int rc = real_clock_gettime(id, ts);
  if (rc != 0 || !enabled) return rc;
  switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_TAI:
      set_ts(ts, warp_realtime(ts_ns(ts)));
      break;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME:
      set_ts(ts, warp_monotonic(ts_ns(ts)));
      break;
    default:
      break; /* CPU-time clocks and others are the process's own */
  }
  return rc;
}

/* An absolute sleep until a warped instant: the kernel waits for the true one it corresponds to (a
 * node sleeping until its next period would otherwise wake an offset early or late, and spin). */
EXPORT int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
  if (!real_clock_nanosleep) real_clock_nanosleep = (clock_nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
  if (!real_clock_nanosleep) return ENOSYS;
  if (enabled && (flags & TIMER_ABSTIME) && req) {
    struct timespec t = *req;
    switch (id) {
      case CLOCK_REALTIME:
      case CLOCK_TAI:
        set_ts(&t, unwarp_realtime(ts_ns(req)));
        return real_clock_nanosleep(id, flags, &t, rem);
      case CLOCK_MONOTONIC:
      case CLOCK_BOOTTIME:
        set_ts(&t, unwarp_monotonic(ts_ns(req)));
        return real_clock_nanosleep(id, flags, &t, rem);
      default:
        break;
    }
  }
  return real_clock_nanosleep(id, flags, req, rem);
}

EXPORT int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0) { /* tv is declared nonnull, as glibc's is */
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return rc;
}

EXPORT time_t time(time_t *t) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}

EXPORT int timespec_get(struct timespec *ts, int base) {
  if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, ts) != 0) return 0;
  return base;
}

/* Whether this process's clock is warped (1) — the nodes say so in their log. */
EXPORT int ddslab_warpclock_active(void) { return enabled; }
