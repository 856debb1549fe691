/* ROS 2 messages serialised by hand into the CDR that rmw_cyclonedds puts on
 * the wire (XCDR1, little endian, encapsulation CDR_LE = 00 01, body padded
 * to a multiple of 4 with the pad count in the options field).
 *
 * The lab emulates ROS 2 applications without ROS 2: every node builds the
 * exact byte layout of the message type it publishes, sized to the sample
 * size the scenario asks for. Each type has at most two free knobs that change
 * its size without changing its shape:
 *   n  the main variable part (image bytes, points, objects, statuses, ...)
 *   m  the length of header.frame_id (types with a header) or a second
 *      variable part (see the table in rosmsg.c)
 * rosmsg_solve() finds (n, m) so that the serialised size is exactly the
 * requested one, or reports the nearest sizes the type can take.
 *
 * Used by the Cyclone DDS node (C) and the Fast DDS node (C++). */
#ifndef DDSLAB_ROSMSG_H
#define DDSLAB_ROSMSG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROSMSG_MAX_STAMPS 8

typedef enum { CONTENT_PATTERN = 0, CONTENT_ZEROS = 1, CONTENT_RANDOM = 2 } rosmsg_content;

/* A message built for one topic: the full serialised payload (4-byte
 * encapsulation header + body) and where its time stamps and its sample
 * counter live, so a publisher can patch them just before each write. */
typedef struct {
  uint8_t *buf;          /* serialised payload, `size` bytes */
  size_t size;           /* wire size = 4 + body padded to 4 */
  int nstamps;           /* builtin_interfaces/Time fields to set at publish */
  size_t stamps[ROSMSG_MAX_STAMPS]; /* offsets in buf of each Time */
  size_t counter_off;    /* offset in buf of the 8-byte sample counter, 0 = none */
  unsigned n, m;         /* the knobs that produced this size */
} rosmsg;

typedef struct rosmsg_type rosmsg_type;

/* Looks a type up by its ROS 2 name ("sensor_msgs/msg/Image") or DDS name
 * ("sensor_msgs::msg::dds_::Image_"). NULL if unknown. */
const rosmsg_type *rosmsg_find(const char *name);
const char *rosmsg_ros_name(const rosmsg_type *t);
const char *rosmsg_dds_name(const rosmsg_type *t);
/* Offset in the payload of header.stamp (or the leading Time), -1 if the type has none. */
long rosmsg_stamp_offset(const rosmsg_type *t);

/* Serialised wire size for knobs (n, m). */
size_t rosmsg_size(const rosmsg_type *t, unsigned n, unsigned m);

/* Finds knobs with rosmsg_size == want. Returns 0 and sets *n, *m on success;
 * otherwise -1 and the nearest achievable sizes below and above (0 if none). */
int rosmsg_solve(const rosmsg_type *t, size_t want, unsigned *n, unsigned *m, size_t *below, size_t *above);

/* Builds the message for knobs (n, m) with synthetic content. Returns 0 on success. */
int rosmsg_build(const rosmsg_type *t, unsigned n, unsigned m, rosmsg_content content, uint64_t seed, rosmsg *out);
void rosmsg_free(rosmsg *msg);

/* Writes the time into every stamp and the counter (if any). */
void rosmsg_set_stamp(rosmsg *msg, int64_t t_ns);
void rosmsg_set_counter(rosmsg *msg, uint64_t counter);

/* Reads the first builtin_interfaces/Time of a received payload at `off`
 * (CDR_LE or CDR_BE). Returns -1 if the payload is too short or unknown. */
int64_t rosmsg_read_stamp(const uint8_t *payload, size_t len, long off);

/* Lists the supported types, one per line, to `out` (a FILE*). */
void rosmsg_list(void *out);

#ifdef __cplusplus
}
#endif
#endif
