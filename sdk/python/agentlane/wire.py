"""Conversion between the dataclasses of agentlane.types and JSON.

A dataclass field's JSON name is its name in lowerCamelCase (``run_id`` is
``runId``), or the ``json`` entry of the field's metadata where that rule
does not give it (``from_`` is ``from``). Fields that are None are left out
of what is sent; fields the server sends that a dataclass does not know are
ignored, so that a newer server does not break an older client.
"""

import dataclasses
import datetime
import re
import typing
from typing import Any, Dict, Type, TypeVar

T = TypeVar("T")

# Go's zero time, which the server sends for a time that is not set.
ZERO_TIME = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)

_RFC3339 = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)$"
)

_hints_cache: Dict[type, Dict[str, Any]] = {}


def json_name(field: "dataclasses.Field[Any]") -> str:
    """The JSON name of a dataclass field."""
    explicit = field.metadata.get("json")
    if explicit:
        return str(explicit)
    head, *rest = field.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def type_hints(cls: type) -> Dict[str, Any]:
    """The resolved annotations of a dataclass, cached."""
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _hints_cache[cls] = hints
    return hints


def parse_time(value: str) -> datetime.datetime:
    """Parses an RFC 3339 time, such as Go writes (nanoseconds included)."""
    m = _RFC3339.match(value)
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % value)
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0")[:6].ljust(6, "0"))
    zone = m.group(8)
    if zone in ("Z", "z"):
        tz = datetime.timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        offset = datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        tz = datetime.timezone(sign * offset)
    return datetime.datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)


def format_time(value: datetime.datetime) -> str:
    """Formats a time as RFC 3339 in UTC; a naive time is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    value = value.astimezone(datetime.timezone.utc)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(value: "typing.Union[str, float, int, datetime.timedelta]") -> str:
    """A duration as the server reads it: a Go duration string such as
    ``1.5s``. A number is seconds; a string is passed on as it is."""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if value < 0:
        raise ValueError("a duration cannot be negative: %r" % value)
    millis = int(round(value * 1000))
    if millis % 1000 == 0:
        return "%ds" % (millis // 1000)
    return "%dms" % millis


def to_wire(value: Any) -> Any:
    """Converts a dataclass (or a list, dict or time of them) to JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for field in dataclasses.fields(value):
            v = getattr(value, field.name)
            if v is not None:
                out[json_name(field)] = to_wire(v)
        return out
    if isinstance(value, datetime.datetime):
        return format_time(value)
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def from_wire(tp: Type[T], value: Any) -> T:
    """Converts decoded JSON to the type tp (a dataclass, a typing generic,
    a time or a plain type)."""
    return typing.cast(T, _decode(tp, value))


def _decode(tp: Any, value: Any) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner[0], value)
    if value is None:
        return _zero(tp)
    if origin in (list, typing.List):
        (item,) = typing.get_args(tp)
        return [_decode(item, v) for v in _expect(value, list, tp)]
    if origin in (dict, typing.Dict):
        _, item = typing.get_args(tp)
        return {k: _decode(item, v) for k, v in _expect(value, dict, tp).items()}
    if tp is datetime.datetime:
        return parse_time(_expect(value, str, tp))
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, _expect(value, dict, tp))
    if tp is float:
        return float(_expect(value, (int, float), tp))
    if tp is int:
        if isinstance(value, bool):
            raise TypeError("want an integer, got %r" % value)
        return _expect(value, int, tp)
    return _expect(value, tp, tp)


def _decode_dataclass(cls: Any, data: Dict[str, Any]) -> Any:
    hints = type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        name = json_name(field)
        if name in data:
            kwargs[field.name] = _decode(hints[field.name], data[name])
    return cls(**kwargs)


def _zero(tp: Any) -> Any:
    """The value a JSON null stands for where tp is not Optional."""
    if tp is datetime.datetime:
        return ZERO_TIME
    if dataclasses.is_dataclass(tp):
        return tp()
    origin = typing.get_origin(tp)
    if origin in (list, typing.List):
        return []
    if origin in (dict, typing.Dict):
        return {}
    if tp in (str, int, float, bool):
        return tp()
    return None


def _expect(value: Any, kind: Any, tp: Any) -> Any:
    if not isinstance(value, kind):
        raise TypeError("want %s, got %r" % (getattr(tp, "__name__", tp), value))
    return value
