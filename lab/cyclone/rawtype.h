/* A Cyclone DDS sertype whose samples are already-serialised CDR payloads.
 *
 * rmw_cyclonedds does the same: the application hands Cyclone the bytes, and
 * the type name announced in discovery is whatever the caller chooses (here
 * the ROS 2 DDS type name). On reception the payload is reassembled as is,
 * and the RTPS writer sequence number of the DATA / DATA_FRAG that carried it
 * is read from the submessage header, so the ground truth can record the
 * sequence number that is on the wire. */
#ifndef DDSLAB_RAWTYPE_H
#define DDSLAB_RAWTYPE_H

#include <stdint.h>
#include <stddef.h>

struct ddsi_sertype;

/* What the application writes and takes. On write, buf/len is the payload
 * (encapsulation header included). On take, len is the payload size, sn the
 * RTPS writer sequence number (-1 if unknown) and head the first bytes. */
#define RAWSAMPLE_HEAD 64
typedef struct {
  const uint8_t *buf;
  uint32_t len;
  int64_t sn;
  uint8_t head[RAWSAMPLE_HEAD];
} rawsample;

struct ddsi_sertype *rawtype_new(const char *dds_type_name);

#endif
