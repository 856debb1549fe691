"""RIHS01 type hashes (REP-2011) of the lab's message types, as rmw_zenoh puts them in key expressions.

rmw_zenoh (Iron and later: Jazzy, Kilted, Rolling) writes the type hash of a topic's type into its
data key expression and its liveliness tokens: `RIHS01_<sha256 hex>`, computed at build time by
rosidl_generator_type_description (ros2/rosidl, rosidl_generator_type_description/__init__.py:
`serialize_field_type`, `extract_full_type_description`, `calculate_type_hash`). This module
recomputes it without ROS 2, from the field lists below:

- a type's description is its name (`pkg/msg/Type`) and its fields, each with its name and type:
  `type_id` (type_description_interfaces/msg/FieldType.msg: the element type's id, +48 for a
  fixed array, +96 for a bounded sequence, +144 for an unbounded one), `capacity` (the array size
  or the sequence bound, else 0), `string_capacity` (the bound of a bounded string, else 0) and
  `nested_type_name` (the referenced type, else ""); constants, default values and comments are
  not part of it;
- the hashed document is `{"type_description": <the type>, "referenced_type_descriptions":
  [<every type it references, directly or not, sorted by name>]}`, serialised by Python's
  json.dumps with separators (", ", ": "), keys in that order, ASCII only, no indentation;
- the hash is `RIHS01_` + the SHA-256 of that text, in lower-case hex.

The .msg definitions are those of the ROS 2 Jazzy packages (ros2/common_interfaces,
ros2/rcl_interfaces, ros2/geometry2, ros2/unique_identifier_msgs) and, for the Autoware types
the lab reproduces, of autowarefoundation/autoware_auto_msgs, autoware_adapi_msgs and
tier4_autoware_msgs: the layouts lab/common/rosmsg.c serialises. A .msg is turned into IDL by
rosidl_adapter before hashing, so `byte` is an octet (FIELD_TYPE_BYTE) and `char` a uint8.
tests/test_type_hash.py checks the results against hashes published by real ROS 2 builds.
"""
import hashlib
import json

# FieldType ids (type_description_interfaces/msg/FieldType.msg) of the .msg primitive types
_PRIMITIVE_IDS = {
    "int8": 2, "uint8": 3, "char": 3, "int16": 4, "uint16": 5, "int32": 6, "uint32": 7, "int64": 8,
    "uint64": 9, "float32": 10, "float64": 11, "bool": 15, "byte": 16, "string": 17, "wstring": 18,
}
_NESTED = 1
_BOUNDED_STRING, _BOUNDED_WSTRING = 21, 22
_ARRAY, _BOUNDED_SEQUENCE, _UNBOUNDED_SEQUENCE = 48, 96, 144

_H = "std_msgs/msg/Header"
_T = "builtin_interfaces/msg/Time"

# Every type the lab can publish and every type they reference: (field type, field name) in
# .msg order, nested types written with their full name.
MSGS = {
    "builtin_interfaces/msg/Time": [("int32", "sec"), ("uint32", "nanosec")],
    "builtin_interfaces/msg/Duration": [("int32", "sec"), ("uint32", "nanosec")],
    "std_msgs/msg/Header": [(_T, "stamp"), ("string", "frame_id")],
    "std_msgs/msg/String": [("string", "data")],
    "std_msgs/msg/MultiArrayDimension": [("string", "label"), ("uint32", "size"), ("uint32", "stride")],
    "std_msgs/msg/MultiArrayLayout": [("std_msgs/msg/MultiArrayDimension[]", "dim"), ("uint32", "data_offset")],
    "std_msgs/msg/UInt8MultiArray": [("std_msgs/msg/MultiArrayLayout", "layout"), ("uint8[]", "data")],
    "geometry_msgs/msg/Point": [("float64", "x"), ("float64", "y"), ("float64", "z")],
    "geometry_msgs/msg/Point32": [("float32", "x"), ("float32", "y"), ("float32", "z")],
    "geometry_msgs/msg/Vector3": [("float64", "x"), ("float64", "y"), ("float64", "z")],
    "geometry_msgs/msg/Quaternion": [("float64", "x"), ("float64", "y"), ("float64", "z"), ("float64", "w")],
    "geometry_msgs/msg/Pose": [("geometry_msgs/msg/Point", "position"), ("geometry_msgs/msg/Quaternion", "orientation")],
    "geometry_msgs/msg/PoseStamped": [(_H, "header"), ("geometry_msgs/msg/Pose", "pose")],
    "geometry_msgs/msg/PoseWithCovariance": [("geometry_msgs/msg/Pose", "pose"), ("float64[36]", "covariance")],
    "geometry_msgs/msg/PoseWithCovarianceStamped": [(_H, "header"), ("geometry_msgs/msg/PoseWithCovariance", "pose")],
    "geometry_msgs/msg/Twist": [("geometry_msgs/msg/Vector3", "linear"), ("geometry_msgs/msg/Vector3", "angular")],
    "geometry_msgs/msg/TwistWithCovariance": [("geometry_msgs/msg/Twist", "twist"), ("float64[36]", "covariance")],
    "geometry_msgs/msg/TwistWithCovarianceStamped": [(_H, "header"),
                                                     ("geometry_msgs/msg/TwistWithCovariance", "twist")],
    "geometry_msgs/msg/Accel": [("geometry_msgs/msg/Vector3", "linear"), ("geometry_msgs/msg/Vector3", "angular")],
    "geometry_msgs/msg/AccelWithCovariance": [("geometry_msgs/msg/Accel", "accel"), ("float64[36]", "covariance")],
    "geometry_msgs/msg/AccelWithCovarianceStamped": [(_H, "header"),
                                                     ("geometry_msgs/msg/AccelWithCovariance", "accel")],
    "geometry_msgs/msg/Transform": [("geometry_msgs/msg/Vector3", "translation"),
                                    ("geometry_msgs/msg/Quaternion", "rotation")],
    "geometry_msgs/msg/TransformStamped": [(_H, "header"), ("string", "child_frame_id"),
                                           ("geometry_msgs/msg/Transform", "transform")],
    "geometry_msgs/msg/Polygon": [("geometry_msgs/msg/Point32[]", "points")],
    "sensor_msgs/msg/Image": [(_H, "header"), ("uint32", "height"), ("uint32", "width"), ("string", "encoding"),
                              ("uint8", "is_bigendian"), ("uint32", "step"), ("uint8[]", "data")],
    "sensor_msgs/msg/PointField": [("string", "name"), ("uint32", "offset"), ("uint8", "datatype"),
                                   ("uint32", "count")],
    "sensor_msgs/msg/PointCloud2": [(_H, "header"), ("uint32", "height"), ("uint32", "width"),
                                    ("sensor_msgs/msg/PointField[]", "fields"), ("bool", "is_bigendian"),
                                    ("uint32", "point_step"), ("uint32", "row_step"), ("uint8[]", "data"),
                                    ("bool", "is_dense")],
    "sensor_msgs/msg/Imu": [(_H, "header"), ("geometry_msgs/msg/Quaternion", "orientation"),
                            ("float64[9]", "orientation_covariance"), ("geometry_msgs/msg/Vector3", "angular_velocity"),
                            ("float64[9]", "angular_velocity_covariance"),
                            ("geometry_msgs/msg/Vector3", "linear_acceleration"),
                            ("float64[9]", "linear_acceleration_covariance")],
    "sensor_msgs/msg/RegionOfInterest": [("uint32", "x_offset"), ("uint32", "y_offset"), ("uint32", "height"),
                                         ("uint32", "width"), ("bool", "do_rectify")],
    "nav_msgs/msg/MapMetaData": [(_T, "map_load_time"), ("float32", "resolution"), ("uint32", "width"),
                                 ("uint32", "height"), ("geometry_msgs/msg/Pose", "origin")],
    "nav_msgs/msg/OccupancyGrid": [(_H, "header"), ("nav_msgs/msg/MapMetaData", "info"), ("int8[]", "data")],
    "nav_msgs/msg/Odometry": [(_H, "header"), ("string", "child_frame_id"),
                              ("geometry_msgs/msg/PoseWithCovariance", "pose"),
                              ("geometry_msgs/msg/TwistWithCovariance", "twist")],
    "tf2_msgs/msg/TFMessage": [("geometry_msgs/msg/TransformStamped[]", "transforms")],
    "rosgraph_msgs/msg/Clock": [(_T, "clock")],
    "diagnostic_msgs/msg/KeyValue": [("string", "key"), ("string", "value")],
    "diagnostic_msgs/msg/DiagnosticStatus": [("byte", "level"), ("string", "name"), ("string", "message"),
                                             ("string", "hardware_id"), ("diagnostic_msgs/msg/KeyValue[]", "values")],
    "diagnostic_msgs/msg/DiagnosticArray": [(_H, "header"), ("diagnostic_msgs/msg/DiagnosticStatus[]", "status")],
    "rcl_interfaces/msg/ParameterValue": [("uint8", "type"), ("bool", "bool_value"), ("int64", "integer_value"),
                                          ("float64", "double_value"), ("string", "string_value"),
                                          ("byte[]", "byte_array_value"), ("bool[]", "bool_array_value"),
                                          ("int64[]", "integer_array_value"), ("float64[]", "double_array_value"),
                                          ("string[]", "string_array_value")],
    "rcl_interfaces/msg/Parameter": [("string", "name"), ("rcl_interfaces/msg/ParameterValue", "value")],
    "rcl_interfaces/msg/ParameterEvent": [(_T, "stamp"), ("string", "node"),
                                          ("rcl_interfaces/msg/Parameter[]", "new_parameters"),
                                          ("rcl_interfaces/msg/Parameter[]", "changed_parameters"),
                                          ("rcl_interfaces/msg/Parameter[]", "deleted_parameters")],
    "unique_identifier_msgs/msg/UUID": [("uint8[16]", "uuid")],
    # autowarefoundation/autoware_auto_msgs (the packages the lab's scenarios name)
    "autoware_auto_vehicle_msgs/msg/VelocityReport": [(_H, "header"), ("float32", "longitudinal_velocity"),
                                                      ("float32", "lateral_velocity"), ("float32", "heading_rate")],
    "autoware_auto_vehicle_msgs/msg/ControlModeReport": [(_T, "stamp"), ("uint8", "mode")],
    "autoware_auto_vehicle_msgs/msg/SteeringReport": [(_T, "stamp"), ("float32", "steering_tire_angle")],
    "autoware_auto_vehicle_msgs/msg/GearReport": [(_T, "stamp"), ("uint8", "report")],
    "autoware_auto_system_msgs/msg/AutowareState": [(_T, "stamp"), ("uint8", "state")],
    "autoware_auto_control_msgs/msg/AckermannLateralCommand": [(_T, "stamp"), ("float32", "steering_tire_angle"),
                                                               ("float32", "steering_tire_rotation_rate")],
    "autoware_auto_control_msgs/msg/LongitudinalCommand": [(_T, "stamp"), ("float32", "speed"),
                                                           ("float32", "acceleration"), ("float32", "jerk")],
    "autoware_auto_control_msgs/msg/AckermannControlCommand": [
        (_T, "stamp"), ("autoware_auto_control_msgs/msg/AckermannLateralCommand", "lateral"),
        ("autoware_auto_control_msgs/msg/LongitudinalCommand", "longitudinal")],
    "autoware_auto_perception_msgs/msg/ObjectClassification": [("uint8", "label"), ("float32", "probability")],
    "autoware_auto_perception_msgs/msg/Shape": [("uint8", "type"), ("geometry_msgs/msg/Polygon", "footprint"),
                                                ("geometry_msgs/msg/Vector3", "dimensions")],
    "autoware_auto_perception_msgs/msg/PredictedPath": [("geometry_msgs/msg/Pose[<=100]", "path"),
                                                        ("builtin_interfaces/msg/Duration", "time_step"),
                                                        ("float32", "confidence")],
    "autoware_auto_perception_msgs/msg/PredictedObjectKinematics": [
        ("geometry_msgs/msg/PoseWithCovariance", "initial_pose_with_covariance"),
        ("geometry_msgs/msg/TwistWithCovariance", "initial_twist_with_covariance"),
        ("geometry_msgs/msg/AccelWithCovariance", "initial_acceleration_with_covariance"),
        ("autoware_auto_perception_msgs/msg/PredictedPath[<=10]", "predicted_paths")],
    "autoware_auto_perception_msgs/msg/PredictedObject": [
        ("unique_identifier_msgs/msg/UUID", "object_id"), ("float32", "existence_probability"),
        ("autoware_auto_perception_msgs/msg/ObjectClassification[]", "classification"),
        ("autoware_auto_perception_msgs/msg/PredictedObjectKinematics", "kinematics"),
        ("autoware_auto_perception_msgs/msg/Shape", "shape")],
    "autoware_auto_perception_msgs/msg/PredictedObjects": [
        (_H, "header"), ("autoware_auto_perception_msgs/msg/PredictedObject[]", "objects")],
    "autoware_auto_perception_msgs/msg/TrackedObjectKinematics": [
        ("geometry_msgs/msg/PoseWithCovariance", "pose_with_covariance"), ("uint8", "orientation_availability"),
        ("geometry_msgs/msg/TwistWithCovariance", "twist_with_covariance"),
        ("geometry_msgs/msg/AccelWithCovariance", "acceleration_with_covariance"), ("bool", "is_stationary")],
    "autoware_auto_perception_msgs/msg/TrackedObject": [
        ("unique_identifier_msgs/msg/UUID", "object_id"), ("float32", "existence_probability"),
        ("autoware_auto_perception_msgs/msg/ObjectClassification[]", "classification"),
        ("autoware_auto_perception_msgs/msg/TrackedObjectKinematics", "kinematics"),
        ("autoware_auto_perception_msgs/msg/Shape", "shape")],
    "autoware_auto_perception_msgs/msg/TrackedObjects": [
        (_H, "header"), ("autoware_auto_perception_msgs/msg/TrackedObject[]", "objects")],
    "autoware_auto_perception_msgs/msg/DetectedObjectKinematics": [
        ("geometry_msgs/msg/PoseWithCovariance", "pose_with_covariance"), ("bool", "has_position_covariance"),
        ("uint8", "orientation_availability"), ("geometry_msgs/msg/TwistWithCovariance", "twist_with_covariance"),
        ("bool", "has_twist"), ("bool", "has_twist_covariance")],
    "autoware_auto_perception_msgs/msg/DetectedObject": [
        ("float32", "existence_probability"),
        ("autoware_auto_perception_msgs/msg/ObjectClassification[]", "classification"),
        ("autoware_auto_perception_msgs/msg/DetectedObjectKinematics", "kinematics"),
        ("autoware_auto_perception_msgs/msg/Shape", "shape")],
    # autowarefoundation/autoware_adapi_msgs
    "autoware_adapi_v1_msgs/msg/RouteState": [(_T, "stamp"), ("uint16", "state")],
    "autoware_adapi_v1_msgs/msg/MrmState": [(_T, "stamp"), ("uint16", "state"), ("uint16", "behavior")],
    "autoware_adapi_v1_msgs/msg/LocalizationInitializationState": [(_T, "stamp"), ("uint16", "state")],
    # tier4/tier4_autoware_msgs
    "tier4_perception_msgs/msg/Feature": [("sensor_msgs/msg/PointCloud2", "cluster"),
                                          ("sensor_msgs/msg/RegionOfInterest", "roi")],
    "tier4_perception_msgs/msg/DetectedObjectWithFeature": [
        ("autoware_auto_perception_msgs/msg/DetectedObject", "object"), ("tier4_perception_msgs/msg/Feature", "feature")],
    "tier4_perception_msgs/msg/DetectedObjectsWithFeature": [
        (_H, "header"), ("tier4_perception_msgs/msg/DetectedObjectWithFeature[]", "feature_objects")],
}


def field_type(spec):
    """The FieldType dict of a .msg field type: `uint8`, `string<=10`, `pkg/msg/T[]`, `float64[36]`, `T[<=5]`."""
    capacity, add = 0, 0
    if spec.endswith("]"):
        spec, bound = spec[:-1].split("[")
        if bound == "":
            add = _UNBOUNDED_SEQUENCE
        elif bound.startswith("<="):
            add, capacity = _BOUNDED_SEQUENCE, int(bound[2:])
        else:
            add, capacity = _ARRAY, int(bound)
    string_capacity, nested = 0, ""
    if "<=" in spec:  # bounded string
        base, bound = spec.split("<=")
        type_id = {"string": _BOUNDED_STRING, "wstring": _BOUNDED_WSTRING}[base]
        string_capacity = int(bound)
    elif spec in _PRIMITIVE_IDS:
        type_id = _PRIMITIVE_IDS[spec]
    elif spec.count("/") == 2:
        type_id, nested = _NESTED, spec
    else:
        raise ValueError(f"unknown field type {spec!r}")
    return {"type_id": type_id + add, "capacity": capacity, "string_capacity": string_capacity,
            "nested_type_name": nested}


def individual_description(name, msgs=MSGS):
    return {"type_name": name,
            "fields": [{"name": fname, "type": field_type(ftype)} for ftype, fname in msgs[name]]}


def full_description(name, msgs=MSGS):
    """The TypeDescription of `name`: the type and every type it references, sorted by name."""
    if name not in msgs:
        raise KeyError(f"no type description for {name}")
    top = individual_description(name, msgs)
    seen, queue = set(), [f["type"]["nested_type_name"] for f in top["fields"]]
    while queue:
        t = queue.pop()
        if t and t not in seen:
            seen.add(t)
            queue.extend(f["type"]["nested_type_name"] for f in individual_description(t, msgs)["fields"])
    return {"type_description": top,
            "referenced_type_descriptions": [individual_description(t, msgs) for t in sorted(seen)]}


def hash_text(name, msgs=MSGS):
    """The exact text rosidl hashes for `name`."""
    return json.dumps(full_description(name, msgs), skipkeys=False, ensure_ascii=True, check_circular=True,
                      allow_nan=False, indent=None, separators=(", ", ": "), sort_keys=False)


def type_hash(name, msgs=MSGS):
    """`RIHS01_<sha256>` of a ROS 2 type named `pkg/msg/Type` (or its DDS name `pkg::msg::dds_::Type_`)."""
    return "RIHS01_" + hashlib.sha256(hash_text(ros_name(name), msgs).encode("utf-8")).hexdigest()


def ros_name(name):
    """`sensor_msgs::msg::dds_::Image_` -> `sensor_msgs/msg/Image`; a ROS name is returned as it is."""
    if "::" in name:
        parts = name.split("::")
        parts = [p for p in parts if p != "dds_"]
        if parts[-1].endswith("_"):
            parts[-1] = parts[-1][:-1]
        return "/".join(parts)
    return name
