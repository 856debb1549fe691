"""RIHS01 type hashes (REP-2011) computed by lab/zenoh/type_hash.py, checked against published ones.

Oracle: the hashes real ROS 2 builds wrote, which nobody here computed. rosidl's code generators
put each type's RIHS01 hash in the C code they generate (`<type>__get_type_hash` in
`<type>__description.c`, `<type>__TYPE_HASH` in `<type>__struct.h`, and an `EXPECTED_HASH` of every
referenced type), and such generated trees are public: hpmicro/hpm_sdk carries micro-ROS's Kilted
build (middleware/microros/kilted/include/<pkg>/<pkg>/msg/detail/<type>__description.c, cited
below as KILTED + "<pkg>/<type>"), and many ROS 2 workspaces commit their build/ or install/
directory. The type definitions are the same in Jazzy and Kilted for every type here. rmw_zenoh
(ros2/rmw_zenoh docs/design.md) shows std_msgs/msg/String's in a key expression:
`0/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c74…`.

Every standard type the lab publishes (lab/common/rosmsg.c) has its published hash checked here,
with the types they reference. The Autoware types the lab reproduces (autoware_auto_vehicle_msgs,
autoware_auto_system_msgs, autoware_auto_control_msgs, autoware_auto_perception_msgs,
autoware_adapi_v1_msgs, tier4_perception_msgs) have no published RIHS01 hash that could be found
(autoware_auto_msgs predates REP-2011 and was never released for Jazzy; exact-string searches of
public code for the hashes computed here found nothing): their hashes rest on the algorithm the
standard types prove, including bounded sequences (rcl_interfaces/msg/ParameterDescriptor, whose
published hash needs the sequence bound as the field's capacity) and fixed arrays
(unique_identifier_msgs/msg/UUID, the covariances), and on their field lists as written in
type_hash.py from the .msg files (the layouts rosmsg.c serialises).
"""
import re
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "lab" / "zenoh"))
import type_hash  # noqa: E402

KILTED = "hpmicro/hpm_sdk middleware/microros/kilted/include/"

# type -> (published RIHS01 hash, where it is published)
PUBLISHED = {
    # ros2/rmw_zenoh docs/design.md (the `chatter` key expression); KILTED std_msgs/string__description.c
    "std_msgs/msg/String": ("df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
                            "rmw_zenoh docs/design.md; " + KILTED + "std_msgs/std_msgs/msg/detail/string__description.c"),
    "builtin_interfaces/msg/Time": ("b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197",
                                    KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "std_msgs/msg/Header": ("f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01",
                            KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "sensor_msgs/msg/Image": ("d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47",
                              KILTED + "sensor_msgs/sensor_msgs/msg/detail/image__description.c"),
    "nav_msgs/msg/Odometry": ("3cc97dc7fb7502f8714462c526d369e35b603cfc34d946e3f2eda2766dfec6e0",
                              KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c"),
    "geometry_msgs/msg/Point": ("6963084842a9b04494d6b2941d11444708d892da2f4b09843b9c43f42a7f6881",
                                KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/Pose": ("d501954e9476cea2996984e812054b68026ae0bfae789d9a10b23daf35cc90fa",
                               KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/PoseWithCovariance": (
        "9a7c0fd234b7f45c6098745ecccd773ca1085670e64107135397aee31c02e1bb",
        KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/Quaternion": ("8a765f66778c8ff7c8ab94afcc590a2ed5325a1d9a076ffff38fbce36f458684",
                                     KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/Twist": ("9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a",
                                KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/TwistWithCovariance": (
        "49f574f033f095d8b6cd1beaca5ca7925e296e84af1716d16c89d38b059c8c18",
        KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "geometry_msgs/msg/Vector3": ("cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d",
                                  KILTED + "nav_msgs/nav_msgs/msg/detail/odometry__description.c (EXPECTED_HASH)"),
    "rcl_interfaces/msg/ParameterDescriptor": (
        "52175dbfda6c51153101d33d2a9da05743f66f02d5ab2ca9ec4709b46b73d704",
        KILTED + "rcl_interfaces/rcl_interfaces/msg/detail/parameter_descriptor__description.c"),
    "rcl_interfaces/msg/FloatingPointRange": (
        "e6af23a23c177fee5f3075c8b1e435162a9b63c863d78c06017460b49684262d",
        KILTED + "rcl_interfaces/rcl_interfaces/msg/detail/parameter_descriptor__description.c (EXPECTED_HASH)"),
    "rcl_interfaces/msg/IntegerRange": (
        "f7b7fdc0f65f07702e099218e13288c3963bcb9345bde78b560e6cd19800fc5a",
        KILTED + "rcl_interfaces/rcl_interfaces/msg/detail/parameter_descriptor__description.c (EXPECTED_HASH)"),
    # The values below were found by exact-string search of public rosidl-generated code (the hash
    # of <type>__get_type_hash in <type>__description.c, <type>__TYPE_HASH in <type>__struct.h, or a
    # downstream package's <type>__EXPECTED_HASH); the Kilted tree holds the type's own file.
    "sensor_msgs/msg/PointCloud2": ("9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5",
                                    KILTED + "sensor_msgs/sensor_msgs/msg/detail/point_cloud2__description.c"),
    "sensor_msgs/msg/Imu": ("7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b",
                            KILTED + "sensor_msgs/sensor_msgs/msg/detail/imu__description.c"),
    "sensor_msgs/msg/RegionOfInterest": ("ad16bcba5f9131dcdba6fbded19f726f5440e3c513b4fb586dd3027eeed8abb1",
                                         KILTED + "sensor_msgs/sensor_msgs/msg/detail/region_of_interest__description.c"),
    "nav_msgs/msg/OccupancyGrid": ("8d348150c12913a31ee0ec170fbf25089e4745d17035792a1ba94d6f0bc0cfc7",
                                   KILTED + "nav_msgs/nav_msgs/msg/detail/occupancy_grid__description.c"),
    "nav_msgs/msg/MapMetaData": ("2772d4b2000ef2b35dbaeb80fd3946c1369f817fb4f75677d916d27c17d763c8",
                                 KILTED + "nav_msgs/nav_msgs/msg/detail/map_meta_data__description.c"),
    "std_msgs/msg/UInt8MultiArray": ("5687e861b8d307a5e48b7515467ae7a5fc2daf805bd0ce6d8e9e604bade9f385",
                                     KILTED + "std_msgs/std_msgs/msg/detail/u_int8_multi_array__description.c"),
    "std_msgs/msg/MultiArrayLayout": ("4c66e6f78e740ac103a94cf63259f968e48c617e7699e829b63c21a5cb50dac6",
                                      KILTED + "std_msgs/std_msgs/msg/detail/multi_array_layout__description.c"),
    "rosgraph_msgs/msg/Clock": ("692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564",
                                KILTED + "rosgraph_msgs/rosgraph_msgs/msg/detail/clock__description.c"),
    "geometry_msgs/msg/PoseStamped": ("10f3786d7d40fd2b54367835614bff85d4ad3b5dab62bf8bca0cc232d73b4cd8",
                                      KILTED + "geometry_msgs/geometry_msgs/msg/detail/pose_stamped__description.c"),
    "geometry_msgs/msg/PoseWithCovarianceStamped": (
        "26432f9803e43727d3c8f668d1fdb3c630f548af631e2f4e31382371bfea3b6e",
        KILTED + "geometry_msgs/geometry_msgs/msg/detail/pose_with_covariance_stamped__description.c"),
    "geometry_msgs/msg/TwistWithCovarianceStamped": (
        "77b67434531e6529b7a0091357b186b6ebdb17fd9ffd3e0c7ce9d3fb11a44563",
        KILTED + "geometry_msgs/geometry_msgs/msg/detail/twist_with_covariance_stamped__description.c"),
    "geometry_msgs/msg/AccelWithCovarianceStamped": (
        "61c9ad8928e71dd95ce791b2f02809ee2a0bbcc42cd0e4047fd00a822a08e444",
        KILTED + "geometry_msgs/geometry_msgs/msg/detail/accel_with_covariance_stamped__description.c"),
    "geometry_msgs/msg/Transform": ("beb83fbe698636351461f6f35d1abb20010c43d55374d81bd041f1ba2581fddc",
                                    KILTED + "geometry_msgs/geometry_msgs/msg/detail/transform__description.c"),
    "geometry_msgs/msg/TransformStamped": ("0a241f87d04668d94099cbb5ba11691d5ad32c2f29682e4eb5653424bd275206",
                                           KILTED + "geometry_msgs/geometry_msgs/msg/detail/transform_stamped__description.c"),
    "tf2_msgs/msg/TFMessage": ("e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
                               "tf2_msgs/msg/detail/tf_message__struct.h (tf2_msgs__msg__TFMessage__TYPE_HASH) of a "
                               "public micro-ROS Jazzy build; the same as EXPECTED_HASH in downstream packages"),
    "diagnostic_msgs/msg/DiagnosticArray": (
        "5a8a36efb05fb25070fa0fb3810290c0e6cd4862b54a8fb975a1ee8dc55a333e",
        KILTED + "diagnostic_msgs/diagnostic_msgs/msg/detail/diagnostic_array__description.c"),
    "diagnostic_msgs/msg/KeyValue": ("d68081eaa540288c5440753baecef0c4e16e81a5f78ad68902ded5100413bb42",
                                     KILTED + "diagnostic_msgs/diagnostic_msgs/msg/detail/key_value__description.c"),
    "rcl_interfaces/msg/ParameterEvent": (
        "043e627780fcad87a22d225bc2a037361dba713fca6a6b9f4b869a5aa0393204",
        KILTED + "rcl_interfaces/rcl_interfaces/msg/detail/parameter_event__description.c"),
    "unique_identifier_msgs/msg/UUID": (
        "1b8e8aca958cbea28fe6ef60bf6c19b683c97a9ef60bb34752067d0f2f7ab437",
        KILTED + "unique_identifier_msgs/unique_identifier_msgs/msg/detail/uuid__description.c"),
}

# Types published here only to exercise the algorithm (the lab does not publish them): a bounded
# sequence of nested types, whose bound rosidl writes as the field's capacity.
EXTRA = {
    "rcl_interfaces/msg/FloatingPointRange": [("float64", "from_value"), ("float64", "to_value"), ("float64", "step")],
    "rcl_interfaces/msg/IntegerRange": [("int64", "from_value"), ("int64", "to_value"), ("uint64", "step")],
    "rcl_interfaces/msg/ParameterDescriptor": [
        ("string", "name"), ("uint8", "type"), ("string", "description"), ("string", "additional_constraints"),
        ("bool", "read_only"), ("bool", "dynamic_typing"),
        ("rcl_interfaces/msg/FloatingPointRange[<=1]", "floating_point_range"),
        ("rcl_interfaces/msg/IntegerRange[<=1]", "integer_range")],
}
MSGS = {**type_hash.MSGS, **EXTRA}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_hash(name):
    expected, source = PUBLISHED[name]
    assert type_hash.type_hash(name, MSGS) == "RIHS01_" + expected, f"{name}: published in {source}"


def lab_types():
    """The (ROS name, DDS name) of every type the lab's message builder knows (lab/common/rosmsg.c)."""
    src = (REPO / "lab" / "common" / "rosmsg.c").read_text()
    table = src[src.index("static const struct rosmsg_type TYPES[]"):]
    return re.findall(r'\{\s*"([a-z0-9_]+/msg/[A-Za-z0-9]+)",\s*"([A-Za-z0-9_:]+)"', table)


def test_every_lab_type_has_a_hash():
    types = lab_types()
    assert len(types) >= 27
    for ros, dds in types:
        h = type_hash.type_hash(ros)
        assert re.fullmatch(r"RIHS01_[0-9a-f]{64}", h), ros
        assert type_hash.type_hash(dds) == h, dds  # the node looks types up by their DDS name


def test_every_standard_lab_type_is_checked_against_a_published_hash():
    autoware = ("autoware_", "tier4_")
    standard = [ros for ros, _ in lab_types() if not ros.startswith(autoware)]
    assert len(standard) >= 15
    assert [ros for ros in standard if ros not in PUBLISHED] == []


def test_hashed_text_is_rosidl_canonical_json():
    # rosidl_generator_type_description.calculate_type_hash: json.dumps with separators (', ', ': '),
    # keys type_description, referenced_type_descriptions; fields without default_value
    assert type_hash.hash_text("std_msgs/msg/String") == (
        '{"type_description": {"type_name": "std_msgs/msg/String", "fields": [{"name": "data", "type": '
        '{"type_id": 17, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}]}, '
        '"referenced_type_descriptions": []}')


def test_field_types():
    ft = type_hash.field_type
    assert ft("byte") == {"type_id": 16, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}
    assert ft("char")["type_id"] == 3  # rosidl_adapter turns a .msg char into uint8
    assert ft("float64[36]") == {"type_id": 59, "capacity": 36, "string_capacity": 0, "nested_type_name": ""}
    assert ft("uint8[]")["type_id"] == 147
    assert ft("string<=10") == {"type_id": 21, "capacity": 0, "string_capacity": 10, "nested_type_name": ""}
    assert ft("string<=8[<=4]") == {"type_id": 117, "capacity": 4, "string_capacity": 8, "nested_type_name": ""}
    assert ft("geometry_msgs/msg/Pose[<=100]") == {
        "type_id": 97, "capacity": 100, "string_capacity": 0, "nested_type_name": "geometry_msgs/msg/Pose"}
    with pytest.raises(ValueError):
        ft("float128")
    with pytest.raises(KeyError):
        type_hash.type_hash("no_msgs/msg/Nothing")
