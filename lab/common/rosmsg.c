/* Hand-written CDR for the ROS 2 messages the lab publishes. See rosmsg.h.
 *
 * The layouts follow the .msg definitions of ROS 2 Humble and Autoware
 * (tag 2023.10): fields in declaration order, primitives aligned to their
 * size relative to the start of the body (XCDR1, maximum alignment 8),
 * strings as uint32 length (incl. NUL) + bytes + NUL, sequences as uint32
 * count + elements, fixed arrays without a count. */
#include "rosmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t *p;              /* body (after the 4-byte encapsulation header); NULL = measure only */
  size_t off;
  int nstamps;
  size_t stamps[ROSMSG_MAX_STAMPS];
  size_t counter_off;      /* body offset + 1 of the first large byte array, 0 = none yet */
  rosmsg_content content;
  uint64_t rng;
} cdr_t;

typedef void (*build_fn)(cdr_t *c, unsigned n, unsigned m);

struct rosmsg_type {
  const char *ros_name;
  const char *dds_name;
  build_fn build;
  unsigned nmin, nmax_per_byte; /* n range: [nmin, want / nmax_per_byte]; nmax_per_byte 0 = n unused */
  unsigned mdef, mmax;          /* m default and maximum; mmax 0 = m unused */
  long stamp_off;               /* payload offset of the first Time, -1 = none */
  const char *knobs;            /* what n and m mean, for --list-types */
};

/* ---- primitives ---------------------------------------------------------- */

static void c_pad(cdr_t *c, size_t a) {
  while (c->off % a) {
    if (c->p) c->p[c->off] = 0;
    c->off++;
  }
}
static void c_raw(cdr_t *c, const void *v, size_t len) {
  if (c->p) memcpy(c->p + c->off, v, len);
  c->off += len;
}
static void c_u8(cdr_t *c, uint8_t v) { c_raw(c, &v, 1); }
static void c_u16(cdr_t *c, uint16_t v) { c_pad(c, 2); c_raw(c, &v, 2); } /* host is little endian (checked in build) */
static void c_u32(cdr_t *c, uint32_t v) { c_pad(c, 4); c_raw(c, &v, 4); }
static void c_i32(cdr_t *c, int32_t v) { c_pad(c, 4); c_raw(c, &v, 4); }
static void c_f32(cdr_t *c, float v) { c_pad(c, 4); c_raw(c, &v, 4); }
static void c_i64(cdr_t *c, int64_t v) { c_pad(c, 8); c_raw(c, &v, 8); }
static void c_f64(cdr_t *c, double v) { c_pad(c, 8); c_raw(c, &v, 8); }

static uint8_t c_next_byte(cdr_t *c, size_t i) {
  switch (c->content) {
    case CONTENT_ZEROS: return 0;
    case CONTENT_RANDOM:
      c->rng ^= c->rng << 13; c->rng ^= c->rng >> 7; c->rng ^= c->rng << 17;
      return (uint8_t)(c->rng >> 24);
    default: return (uint8_t)(i & 0xff); /* a gradient: realistic enough, compresses well */
  }
}

/* uint8[] / int8[] sequence of `len` synthetic bytes; the first such array of
 * at least 8 bytes carries the sample counter in its first 8 bytes. */
static void c_byte_seq(cdr_t *c, size_t len) {
  c_u32(c, (uint32_t)len);
  if (len >= 8 && c->counter_off == 0) c->counter_off = c->off + 1;
  if (c->p) {
    if (c->content == CONTENT_ZEROS) memset(c->p + c->off, 0, len);
    else for (size_t i = 0; i < len; i++) c->p[c->off + i] = c_next_byte(c, i);
  }
  c->off += len;
}

static void c_string(cdr_t *c, const char *s) {
  size_t len = strlen(s);
  c_u32(c, (uint32_t)(len + 1));
  c_raw(c, s, len);
  c_u8(c, 0);
}

/* A string of exactly `len` characters: `base` truncated or extended with 'x'. */
static void c_string_len(cdr_t *c, const char *base, unsigned len) {
  size_t bl = strlen(base);
  c_u32(c, len + 1);
  for (unsigned i = 0; i < len; i++) c_u8(c, i < bl ? (uint8_t)base[i] : (uint8_t)'x');
  c_u8(c, 0);
}

static void c_time(cdr_t *c) {
  c_pad(c, 4);
  if (c->nstamps < ROSMSG_MAX_STAMPS) c->stamps[c->nstamps++] = c->off;
  c_i32(c, 0);
  c_u32(c, 0);
}

static void c_header(cdr_t *c, const char *frame, unsigned frame_len) {
  c_time(c);
  c_string_len(c, frame, frame_len);
}

/* ---- geometry_msgs ------------------------------------------------------- */

static void c_vec3(cdr_t *c, double x, double y, double z) { c_f64(c, x); c_f64(c, y); c_f64(c, z); }
static void c_quat(cdr_t *c) { c_f64(c, 0); c_f64(c, 0); c_f64(c, 0); c_f64(c, 1); }
static void c_pose(cdr_t *c) { c_vec3(c, 1.5, -0.5, 0.0); c_quat(c); }
static void c_f64s(cdr_t *c, unsigned k) { for (unsigned i = 0; i < k; i++) c_f64(c, i % 7 == 0 ? 0.01 : 0.0); }
static void c_pose_cov(cdr_t *c) { c_pose(c); c_f64s(c, 36); }
static void c_twist(cdr_t *c) { c_vec3(c, 8.3, 0.0, 0.0); c_vec3(c, 0.0, 0.0, 0.02); }
static void c_twist_cov(cdr_t *c) { c_twist(c); c_f64s(c, 36); }
static void c_accel_cov(cdr_t *c) { c_twist(c); c_f64s(c, 36); }

/* ---- message types ------------------------------------------------------- */

/* sensor_msgs/Image: header, height, width, encoding, is_bigendian, step, data */
static void b_image(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "camera", m);
  uint32_t h = 1, w = n, step = n;
  const char *enc = "mono8";
  if (n > 0 && n % (720 * 3) == 0) { h = 720; w = n / (720 * 3); step = w * 3; enc = "bgr8"; }
  c_u32(c, h);
  c_u32(c, w);
  c_string(c, enc);
  c_u8(c, 0);
  c_u32(c, step);
  c_byte_seq(c, n);
}

/* sensor_msgs/PointField: name, offset, datatype, count */
static void c_point_field(cdr_t *c, const char *name, uint32_t offset) {
  c_string(c, name);
  c_u32(c, offset);
  c_u8(c, 7); /* FLOAT32 */
  c_u32(c, 1);
}

/* sensor_msgs/PointCloud2 with x, y, z, intensity (float32, point_step 16), one row. */
static void c_pointcloud2(cdr_t *c, const char *frame, unsigned frame_len, unsigned points) {
  c_header(c, frame, frame_len);
  c_u32(c, 1);
  c_u32(c, points);
  c_u32(c, 4);
  c_point_field(c, "x", 0);
  c_point_field(c, "y", 4);
  c_point_field(c, "z", 8);
  c_point_field(c, "intensity", 12);
  c_u8(c, 0);            /* is_bigendian */
  c_u32(c, 16);          /* point_step */
  c_u32(c, 16 * points); /* row_step */
  c_byte_seq(c, (size_t)16 * points);
  c_u8(c, 1);            /* is_dense */
}
static void b_pointcloud2(cdr_t *c, unsigned n, unsigned m) { c_pointcloud2(c, "base_link", m, n); }

/* nav_msgs/OccupancyGrid: header, MapMetaData info, int8[] data */
static void b_occupancy_grid(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "map", m);
  uint32_t w = n, h = 1;
  for (uint32_t s = 1; (uint64_t)s * s <= n; s++) if ((uint64_t)s * s == n) { w = h = s; }
  c_i32(c, 0); c_u32(c, 0); /* map_load_time */
  c_f32(c, 0.5f);           /* resolution */
  c_u32(c, w);
  c_u32(c, h);
  c_pose(c);                /* origin */
  c_byte_seq(c, n);
}

/* std_msgs/UInt8MultiArray: layout {dim[] (empty), data_offset}, data */
static void b_u8_multi_array(cdr_t *c, unsigned n, unsigned m) {
  (void)m;
  c_u32(c, 0);
  c_u32(c, 0);
  c_byte_seq(c, n);
}

/* std_msgs/String */
static void b_string(cdr_t *c, unsigned n, unsigned m) {
  (void)m;
  c_string_len(c, "ddscope lab status: ok ", n);
}

/* autoware_auto_vehicle_msgs/VelocityReport: header, longitudinal_velocity, lateral_velocity, heading_rate */
static void b_velocity_report(cdr_t *c, unsigned n, unsigned m) {
  (void)n;
  c_header(c, "base_link", m);
  c_f32(c, 8.3f);
  c_f32(c, 0.0f);
  c_f32(c, 0.01f);
}

/* builtin_interfaces/Time stamp followed by small fields */
static void b_stamp_u8(cdr_t *c, unsigned n, unsigned m) { (void)n; (void)m; c_time(c); c_u8(c, 1); }
static void b_stamp_f32(cdr_t *c, unsigned n, unsigned m) { (void)n; (void)m; c_time(c); c_f32(c, 0.05f); }
static void b_stamp_u16(cdr_t *c, unsigned n, unsigned m) { (void)n; (void)m; c_time(c); c_u16(c, 2); }
static void b_stamp_u16_u16(cdr_t *c, unsigned n, unsigned m) { (void)n; (void)m; c_time(c); c_u16(c, 1); c_u16(c, 101); }
static void b_clock(cdr_t *c, unsigned n, unsigned m) { (void)n; (void)m; c_time(c); }

/* autoware_auto_control_msgs/AckermannControlCommand: stamp, lateral {stamp, steering_tire_angle,
 * steering_tire_rotation_rate}, longitudinal {stamp, speed, acceleration, jerk} */
static void b_ackermann(cdr_t *c, unsigned n, unsigned m) {
  (void)n; (void)m;
  c_time(c);
  c_time(c); c_f32(c, 0.0f); c_f32(c, 0.0f);
  c_time(c); c_f32(c, 0.0f); c_f32(c, -2.5f); c_f32(c, 0.0f);
}

static void b_pose_stamped(cdr_t *c, unsigned n, unsigned m) { (void)n; c_header(c, "map", m); c_pose(c); }
static void b_pose_cov_stamped(cdr_t *c, unsigned n, unsigned m) { (void)n; c_header(c, "map", m); c_pose_cov(c); }
static void b_twist_cov_stamped(cdr_t *c, unsigned n, unsigned m) { (void)n; c_header(c, "base_link", m); c_twist_cov(c); }
static void b_accel_cov_stamped(cdr_t *c, unsigned n, unsigned m) { (void)n; c_header(c, "base_link", m); c_accel_cov(c); }

/* sensor_msgs/Imu: header, orientation, orientation_covariance[9], angular_velocity,
 * angular_velocity_covariance[9], linear_acceleration, linear_acceleration_covariance[9] */
static void b_imu(cdr_t *c, unsigned n, unsigned m) {
  (void)n;
  c_header(c, "imu_link", m);
  c_quat(c); c_f64s(c, 9);
  c_vec3(c, 0, 0, 0.01); c_f64s(c, 9);
  c_vec3(c, 0.1, 0, 9.81); c_f64s(c, 9);
}

/* nav_msgs/Odometry: header, child_frame_id, pose (with covariance), twist (with covariance) */
static void b_odometry(cdr_t *c, unsigned n, unsigned m) {
  (void)n;
  c_header(c, "map", m);
  c_string(c, "base_link");
  c_pose_cov(c);
  c_twist_cov(c);
}

/* tf2_msgs/TFMessage: TransformStamped[] {header, child_frame_id, Transform {translation, rotation}} */
static void b_tf(cdr_t *c, unsigned n, unsigned m) {
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) {
    c_header(c, "map", 3);
    c_string_len(c, "base_link", m);
    c_vec3(c, 0.5 * i, 0, 1.2);
    c_quat(c);
  }
}

/* diagnostic_msgs/DiagnosticArray: header, DiagnosticStatus[] {level, name, message, hardware_id, KeyValue[] values} */
static void b_diagnostics(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "", m);
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) {
    c_u8(c, 0);
    c_string(c, "lab: sensing");
    c_string(c, "OK");
    c_string(c, "");
    c_u32(c, 1);
    c_string(c, "rate");
    c_string(c, "ok");
  }
}

/* rcl_interfaces/ParameterValue with a double */
static void c_param_value_double(cdr_t *c) {
  c_u8(c, 3);      /* PARAMETER_DOUBLE */
  c_u8(c, 0);      /* bool_value */
  c_i64(c, 0);     /* integer_value */
  c_f64(c, 0.5);   /* double_value */
  c_string(c, ""); /* string_value */
  c_u32(c, 0); c_u32(c, 0); c_u32(c, 0); c_u32(c, 0); c_u32(c, 0); /* the five arrays */
}

/* rcl_interfaces/ParameterEvent: stamp, node, new_parameters[], changed_parameters[], deleted_parameters[] */
static void b_parameter_event(cdr_t *c, unsigned n, unsigned m) {
  c_time(c);
  c_string_len(c, "/sensing/lidar/top/crop_box_filter", m);
  c_u32(c, 0);
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) { c_string(c, "max_z"); c_param_value_double(c); }
  c_u32(c, 0);
}

/* autoware_auto_perception_msgs pieces */
static void c_uuid(cdr_t *c) { for (int i = 0; i < 16; i++) c_u8(c, (uint8_t)(0xa0 + i)); }
static void c_classification(cdr_t *c) { c_u32(c, 1); c_u8(c, 1); c_f32(c, 0.9f); }
static void c_shape(cdr_t *c, unsigned points) {
  c_u8(c, points ? 2 : 0); /* POLYGON or BOUNDING_BOX */
  c_u32(c, points);
  for (unsigned i = 0; i < points; i++) { c_f32(c, (float)i); c_f32(c, 0.5f); c_f32(c, 0.0f); }
  c_vec3(c, 4.5, 1.8, 1.5);
}
static void c_predicted_path(cdr_t *c, unsigned poses) {
  c_u32(c, poses);
  for (unsigned i = 0; i < poses; i++) c_pose(c);
  c_i32(c, 0); c_u32(c, 500000000); /* time_step */
  c_f32(c, 1.0f);                   /* confidence */
}

/* autoware_auto_perception_msgs/PredictedObjects: header, PredictedObject[] {object_id, existence_probability,
 * classification[], kinematics {initial pose/twist/acceleration with covariance, predicted_paths[]}, shape} */
static void b_predicted_objects(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "map", 3);
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) {
    c_uuid(c);
    c_f32(c, 0.95f);
    c_classification(c);
    c_pose_cov(c);
    c_twist_cov(c);
    c_accel_cov(c);
    c_u32(c, 1);
    c_predicted_path(c, 20);
    c_shape(c, i == 0 ? m : 0);
  }
}

/* autoware_auto_perception_msgs/TrackedObjects: header, TrackedObject[] {object_id, existence_probability,
 * classification[], kinematics {pose_with_covariance, orientation_availability, twist_with_covariance,
 * acceleration_with_covariance, is_stationary}, shape} */
static void b_tracked_objects(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "map", 3);
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) {
    c_uuid(c);
    c_f32(c, 0.95f);
    c_classification(c);
    c_pose_cov(c);
    c_u8(c, 2);
    c_twist_cov(c);
    c_accel_cov(c);
    c_u8(c, 0);
    c_shape(c, i == 0 ? m : 0);
  }
}

/* tier4_perception_msgs/DetectedObjectsWithFeature: header, DetectedObjectWithFeature[] {object {existence_probability,
 * classification[], kinematics {pose_with_covariance, has_position_covariance, orientation_availability,
 * twist_with_covariance, has_twist, has_twist_covariance}, shape}, feature {PointCloud2 cluster, RegionOfInterest roi}} */
static void b_detected_objects_with_feature(cdr_t *c, unsigned n, unsigned m) {
  c_header(c, "base_link", 9);
  c_u32(c, n);
  for (unsigned i = 0; i < n; i++) {
    c_f32(c, 0.9f);
    c_classification(c);
    c_pose_cov(c);
    c_u8(c, 0);
    c_u8(c, 0);
    c_twist_cov(c);
    c_u8(c, 0);
    c_u8(c, 0);
    c_shape(c, 0);
    c_pointcloud2(c, "base_link", 9, 64 + (i == 0 ? m : 0));
    c_u32(c, 0); c_u32(c, 0); c_u32(c, 0); c_u32(c, 0); c_u8(c, 0); /* roi */
  }
}

#define NO_N 0, 0
static const struct rosmsg_type TYPES[] = {
  {"sensor_msgs/msg/Image", "sensor_msgs::msg::dds_::Image_", b_image, 0, 1, 6, 64, 4,
   "n = data bytes (bgr8 720 rows when divisible by 2160, else mono8 one row), m = frame_id length"},
  {"sensor_msgs/msg/PointCloud2", "sensor_msgs::msg::dds_::PointCloud2_", b_pointcloud2, 0, 16, 9, 64, 4,
   "n = points (x,y,z,intensity float32, point_step 16), m = frame_id length"},
  {"nav_msgs/msg/OccupancyGrid", "nav_msgs::msg::dds_::OccupancyGrid_", b_occupancy_grid, 0, 1, 3, 64, 4,
   "n = cells, m = frame_id length"},
  {"std_msgs/msg/UInt8MultiArray", "std_msgs::msg::dds_::UInt8MultiArray_", b_u8_multi_array, 0, 1, NO_N, -1,
   "n = data bytes"},
  {"std_msgs/msg/String", "std_msgs::msg::dds_::String_", b_string, 0, 1, NO_N, -1, "n = characters"},
  {"autoware_auto_vehicle_msgs/msg/VelocityReport", "autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_",
   b_velocity_report, 0, 0, 9, 64, 4, "m = frame_id length (base_link = 9)"},
  {"autoware_auto_vehicle_msgs/msg/ControlModeReport", "autoware_auto_vehicle_msgs::msg::dds_::ControlModeReport_",
   b_stamp_u8, 0, 0, NO_N, 4, "fixed"},
  {"autoware_auto_vehicle_msgs/msg/SteeringReport", "autoware_auto_vehicle_msgs::msg::dds_::SteeringReport_",
   b_stamp_f32, 0, 0, NO_N, 4, "fixed"},
  {"autoware_auto_vehicle_msgs/msg/GearReport", "autoware_auto_vehicle_msgs::msg::dds_::GearReport_",
   b_stamp_u8, 0, 0, NO_N, 4, "fixed"},
  {"autoware_auto_system_msgs/msg/AutowareState", "autoware_auto_system_msgs::msg::dds_::AutowareState_",
   b_stamp_u8, 0, 0, NO_N, 4, "fixed"},
  {"autoware_adapi_v1_msgs/msg/RouteState", "autoware_adapi_v1_msgs::msg::dds_::RouteState_",
   b_stamp_u16, 0, 0, NO_N, 4, "fixed"},
  {"autoware_adapi_v1_msgs/msg/MrmState", "autoware_adapi_v1_msgs::msg::dds_::MrmState_",
   b_stamp_u16_u16, 0, 0, NO_N, 4, "fixed"},
  {"autoware_adapi_v1_msgs/msg/LocalizationInitializationState",
   "autoware_adapi_v1_msgs::msg::dds_::LocalizationInitializationState_", b_stamp_u16, 0, 0, NO_N, 4, "fixed"},
  {"rosgraph_msgs/msg/Clock", "rosgraph_msgs::msg::dds_::Clock_", b_clock, 0, 0, NO_N, 4, "fixed"},
  {"autoware_auto_control_msgs/msg/AckermannControlCommand",
   "autoware_auto_control_msgs::msg::dds_::AckermannControlCommand_", b_ackermann, 0, 0, NO_N, 4, "fixed"},
  {"geometry_msgs/msg/PoseStamped", "geometry_msgs::msg::dds_::PoseStamped_", b_pose_stamped, 0, 0, 3, 64, 4,
   "m = frame_id length (map = 3)"},
  {"geometry_msgs/msg/PoseWithCovarianceStamped", "geometry_msgs::msg::dds_::PoseWithCovarianceStamped_",
   b_pose_cov_stamped, 0, 0, 3, 64, 4, "m = frame_id length (map = 3)"},
  {"geometry_msgs/msg/TwistWithCovarianceStamped", "geometry_msgs::msg::dds_::TwistWithCovarianceStamped_",
   b_twist_cov_stamped, 0, 0, 9, 64, 4, "m = frame_id length (base_link = 9)"},
  {"geometry_msgs/msg/AccelWithCovarianceStamped", "geometry_msgs::msg::dds_::AccelWithCovarianceStamped_",
   b_accel_cov_stamped, 0, 0, 9, 64, 4, "m = frame_id length (base_link = 9)"},
  {"sensor_msgs/msg/Imu", "sensor_msgs::msg::dds_::Imu_", b_imu, 0, 0, 8, 64, 4, "m = frame_id length (imu_link = 8)"},
  {"nav_msgs/msg/Odometry", "nav_msgs::msg::dds_::Odometry_", b_odometry, 0, 0, 3, 64, 4,
   "m = frame_id length (map = 3); child_frame_id base_link"},
  {"tf2_msgs/msg/TFMessage", "tf2_msgs::msg::dds_::TFMessage_", b_tf, 0, 64, 9, 64, 8,
   "n = transforms (map -> child), m = child_frame_id length (base_link = 9)"},
  {"diagnostic_msgs/msg/DiagnosticArray", "diagnostic_msgs::msg::dds_::DiagnosticArray_", b_diagnostics, 0, 32, 0, 64,
   4, "n = statuses (one key/value each), m = frame_id length"},
  {"rcl_interfaces/msg/ParameterEvent", "rcl_interfaces::msg::dds_::ParameterEvent_", b_parameter_event, 0, 64, 34, 96,
   4, "n = changed double parameters, m = node name length"},
  {"autoware_auto_perception_msgs/msg/PredictedObjects", "autoware_auto_perception_msgs::msg::dds_::PredictedObjects_",
   b_predicted_objects, 0, 256, 0, 256, 4,
   "n = objects (one 20-pose predicted path each), m = footprint points of the first object"},
  {"autoware_auto_perception_msgs/msg/TrackedObjects", "autoware_auto_perception_msgs::msg::dds_::TrackedObjects_",
   b_tracked_objects, 0, 256, 0, 256, 4, "n = objects, m = footprint points of the first object"},
  {"tier4_perception_msgs/msg/DetectedObjectsWithFeature",
   "tier4_perception_msgs::msg::dds_::DetectedObjectsWithFeature_", b_detected_objects_with_feature, 0, 256, 0, 256, 4,
   "n = objects (64-point cluster each), m = extra cluster points of the first object"},
};
#define NTYPES (sizeof(TYPES) / sizeof(TYPES[0]))

const rosmsg_type *rosmsg_find(const char *name) {
  for (size_t i = 0; i < NTYPES; i++)
    if (strcmp(TYPES[i].ros_name, name) == 0 || strcmp(TYPES[i].dds_name, name) == 0) return &TYPES[i];
  return NULL;
}
const char *rosmsg_ros_name(const rosmsg_type *t) { return t->ros_name; }
const char *rosmsg_dds_name(const rosmsg_type *t) { return t->dds_name; }
long rosmsg_stamp_offset(const rosmsg_type *t) { return t->stamp_off; }

static size_t wire_size(size_t body) { return 4 + ((body + 3) & ~(size_t)3); }

size_t rosmsg_size(const rosmsg_type *t, unsigned n, unsigned m) {
  cdr_t c;
  memset(&c, 0, sizeof c);
  t->build(&c, n, m);
  return wire_size(c.off);
}

int rosmsg_solve(const rosmsg_type *t, size_t want, unsigned *n_out, unsigned *m_out, size_t *below, size_t *above) {
  size_t lo_best = 0, hi_best = 0;
  unsigned nmax = t->nmax_per_byte ? (unsigned)(want / t->nmax_per_byte + 1) : t->nmin;
  if (want > 0x7fffffff) nmax = t->nmin;
  unsigned ms[1 + 1024];
  unsigned nm = 0;
  ms[nm++] = t->mdef;
  for (unsigned m = 0; m <= t->mmax && nm < 1024; m++) if (m != t->mdef) ms[nm++] = m;
  for (unsigned k = 0; k < nm; k++) {
    unsigned m = ms[k];
    /* smallest n in [nmin, nmax] with size >= want (size is non-decreasing in n) */
    unsigned lo = t->nmin, hi = nmax;
    if (rosmsg_size(t, hi, m) < want) {
      size_t s = rosmsg_size(t, hi, m);
      if (s > lo_best) lo_best = s;
      continue;
    }
    while (lo < hi) {
      unsigned mid = lo + (hi - lo) / 2;
      if (rosmsg_size(t, mid, m) >= want) hi = mid; else lo = mid + 1;
    }
    size_t s = rosmsg_size(t, lo, m);
    if (s == want) {
      /* several n can pad to the same size: take the largest, which has the least padding */
      unsigned a = lo, b = nmax;
      while (a < b) {
        unsigned mid = a + (b - a + 1) / 2;
        if (rosmsg_size(t, mid, m) == want) a = mid; else b = mid - 1;
      }
      *n_out = a;
      *m_out = m;
      return 0;
    }
    if (hi_best == 0 || s < hi_best) hi_best = s;
    if (lo > t->nmin) {
      size_t b = rosmsg_size(t, lo - 1, m);
      if (b > lo_best) lo_best = b;
    }
  }
  if (below) *below = lo_best;
  if (above) *above = hi_best;
  return -1;
}

int rosmsg_build(const rosmsg_type *t, unsigned n, unsigned m, rosmsg_content content, uint64_t seed, rosmsg *out) {
  const uint16_t probe = 1;
  if (*(const uint8_t *)&probe != 1) return -1; /* the writer assumes a little-endian host */
  memset(out, 0, sizeof *out);
  size_t size = rosmsg_size(t, n, m);
  uint8_t *buf = calloc(1, size + 8);
  if (!buf) return -1;
  cdr_t c;
  memset(&c, 0, sizeof c);
  c.p = buf + 4;
  c.content = content;
  c.rng = seed ? seed : 0x9e3779b97f4a7c15ull;
  t->build(&c, n, m);
  size_t pad = wire_size(c.off) - 4 - c.off;
  buf[0] = 0x00; buf[1] = 0x01; /* CDR_LE */
  buf[2] = 0x00; buf[3] = (uint8_t)pad;
  out->buf = buf;
  out->size = size;
  out->nstamps = c.nstamps;
  for (int i = 0; i < c.nstamps; i++) out->stamps[i] = c.stamps[i] + 4;
  out->counter_off = c.counter_off ? c.counter_off - 1 + 4 : 0;
  out->n = n;
  out->m = m;
  return 0;
}

void rosmsg_free(rosmsg *msg) {
  free(msg->buf);
  msg->buf = NULL;
}

void rosmsg_set_stamp(rosmsg *msg, int64_t t_ns) {
  int32_t sec = (int32_t)(t_ns / 1000000000);
  uint32_t nsec = (uint32_t)(t_ns % 1000000000);
  for (int i = 0; i < msg->nstamps; i++) {
    memcpy(msg->buf + msg->stamps[i], &sec, 4);
    memcpy(msg->buf + msg->stamps[i] + 4, &nsec, 4);
  }
}

void rosmsg_set_counter(rosmsg *msg, uint64_t counter) {
  if (msg->counter_off) memcpy(msg->buf + msg->counter_off, &counter, 8);
}

int64_t rosmsg_read_stamp(const uint8_t *p, size_t len, long off) {
  if (off < 4 || (size_t)off + 8 > len) return -1;
  int be = (p[1] & 1) == 0; /* CDR_BE, PL_CDR_BE, CDR2_BE ... have an even identifier */
  uint32_t a, b;
  memcpy(&a, p + off, 4);
  memcpy(&b, p + off + 4, 4);
  if (be) { a = __builtin_bswap32(a); b = __builtin_bswap32(b); }
  return (int64_t)(int32_t)a * 1000000000 + b;
}

void rosmsg_list(void *out) {
  FILE *f = out;
  for (size_t i = 0; i < NTYPES; i++) {
    const rosmsg_type *t = &TYPES[i];
    unsigned n = 0, m = t->mdef;
    fprintf(f, "%s\t%s\tmin %zu bytes\t%s\n", t->ros_name, t->dds_name, rosmsg_size(t, n, m), t->knobs);
  }
}
