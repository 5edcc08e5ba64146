"""Checks the client against the OpenAPI document, so that neither can
change without the other: every operation has a method that calls its path
with its method and decodes its schemas, and every object schema has a
dataclass with its properties, their types, and its required fields as
the non-Optional ones."""

import dataclasses
import datetime
import inspect
import typing
import unittest
from typing import Any, Dict, List, Optional, Set, Tuple

import agentlane
from agentlane import types
from agentlane.client import OPERATIONS, Client, SessionClient
from agentlane.wire import json_name, type_hints

from .support import openapi

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_SESSION_PREFIX = "/v1/namespaces/{namespace}/sessions/{session}"


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _operations(doc: Dict[str, Any]) -> Dict[str, Tuple[str, str, Dict[str, Any]]]:
    ops = {}
    for path, item in doc["paths"].items():
        for method in _METHODS:
            if method in item:
                ops[item[method]["operationId"]] = (method.upper(), path, item[method])
    return ops


def _body_schema(content: Dict[str, Any]) -> Optional[str]:
    """The schema a request or response body refers to, if any."""
    for media in ("application/json", "text/event-stream"):
        ref = content.get(media, {}).get("schema", {}).get("$ref")
        if ref:
            return _ref_name(ref)
    return None


class OperationsTest(unittest.TestCase):
    def test_every_operation_has_a_method(self) -> None:
        ops = _operations(openapi())
        self.assertEqual(sorted(ops), sorted(OPERATIONS), "operationIds of the document (first) and the client")
        for op_id, (method, path, _) in ops.items():
            with self.subTest(op_id):
                got_method, got_path, _, _, py_name = OPERATIONS[op_id]
                self.assertEqual((method, path), (got_method, got_path))
                owner = SessionClient if path.startswith(_SESSION_PREFIX) else Client
                self.assertTrue(callable(getattr(owner, py_name, None)),
                                "%s has no method %s for %s" % (owner.__name__, py_name, op_id))

    def test_request_and_response_schemas(self) -> None:
        for op_id, (_, _, op) in _operations(openapi()).items():
            with self.subTest(op_id):
                _, _, request, response, _ = OPERATIONS[op_id]
                want_request = _body_schema(op.get("requestBody", {}).get("content", {}))
                success = next(code for code in sorted(op["responses"]) if code.startswith("2"))
                want_response = _body_schema(op["responses"][success].get("content", {}))
                self.assertEqual(want_request, request and request.__name__, "request body")
                self.assertEqual(want_response, response and response.__name__, "%s response" % success)

    def test_path_parameters_are_method_arguments(self) -> None:
        # Each path parameter below the session is an argument of the method.
        for op_id, (_, path, _, _, py_name) in OPERATIONS.items():
            if not path.startswith(_SESSION_PREFIX):
                continue
            params = [p for p in path[len(_SESSION_PREFIX):].split("/") if p.startswith("{")]
            signature = inspect.signature(getattr(SessionClient, py_name))
            with self.subTest(op_id):
                named = [p for p in signature.parameters if p.endswith("_id") or "{%s}" % p in params]
                self.assertEqual(len(params), len(named),
                                 "%s takes its path parameters %s" % (py_name, params))


class SchemasTest(unittest.TestCase):
    def setUp(self) -> None:
        self.schemas = openapi()["components"]["schemas"]

    def object_schemas(self) -> List[str]:
        return sorted(n for n, s in self.schemas.items() if s.get("type") == "object" or "allOf" in s)

    def flatten(self, schema: Dict[str, Any]) -> Tuple[Dict[str, Any], Set[str]]:
        """The properties and required names of schema, through allOf and $ref."""
        if "$ref" in schema:
            return self.flatten(self.schemas[_ref_name(schema["$ref"])])
        props = dict(schema.get("properties", {}))
        required = set(schema.get("required", []))
        for part in schema.get("allOf", []):
            p, r = self.flatten(part)
            props.update(p)
            required |= r
        return props, required

    def expected_type(self, schema: Dict[str, Any]) -> Any:
        """The Python type of a property's schema."""
        if "$ref" in schema:
            name = _ref_name(schema["$ref"])
            if self.schemas[name].get("type") == "string":
                return str  # Duration, Mode, State
            return getattr(types, name)
        if len(schema.get("allOf", [])) == 1:
            return self.expected_type(schema["allOf"][0])
        kind = schema.get("type")
        if kind is None:
            return Any
        if kind == "string":
            return datetime.datetime if schema.get("format") == "date-time" else str
        if kind == "array":
            return List[self.expected_type(schema["items"])]  # type: ignore[misc]
        if kind == "object":
            return Dict[str, self.expected_type(schema.get("additionalProperties", {}))]  # type: ignore[misc]
        return {"integer": int, "number": float, "boolean": bool}[kind]

    def test_schemas_have_dataclasses(self) -> None:
        names = self.object_schemas()
        self.assertGreater(len(names), 30)
        for name in names:
            with self.subTest(name):
                cls = getattr(types, name, None)
                self.assertTrue(cls is not None and dataclasses.is_dataclass(cls), "no dataclass %s" % name)

    def test_fields_match_properties(self) -> None:
        for name in self.object_schemas():
            cls = getattr(types, name, None)
            if cls is None:
                continue  # test_schemas_have_dataclasses reports it
            props, required = self.flatten(self.schemas[name])
            fields = {json_name(f): f for f in dataclasses.fields(cls)}
            with self.subTest(name):
                self.assertEqual(sorted(props), sorted(fields), "properties (first) against fields")
            hints = type_hints(cls)
            for prop, schema in props.items():
                if prop not in fields:
                    continue
                want = self.expected_type(schema)
                if prop not in required and want is not Any:
                    want = Optional[want]
                with self.subTest("%s.%s" % (name, prop)):
                    self.assertEqual(want, hints[fields[prop].name])

    def test_error_codes(self) -> None:
        self.assertEqual(sorted(self.schemas["Error"]["properties"]["code"]["enum"]), sorted(agentlane.ERROR_CODES))

    def test_enums(self) -> None:
        constants = {
            "Mode": {v for k, v in vars(types).items() if k.startswith("MODE_")},
            "State": {v for k, v in vars(types).items() if k.startswith("STATE_")},
        }
        for name, want in constants.items():
            with self.subTest(name):
                self.assertEqual(set(self.schemas[name]["enum"]), want)
        decision = self.schemas["BudgetCheck"]["properties"]["decision"]["enum"]
        self.assertEqual(set(decision), {types.BUDGET_ALLOW, types.BUDGET_SOFT, types.BUDGET_DENY})

    def test_event_types_are_documented(self) -> None:
        # Every EVENT_* constant of the stream's own kinds is in the Event
        # schema's description of type.
        description = self.schemas["Event"]["properties"]["type"]["description"]
        for key, value in vars(types).items():
            if key.startswith("EVENT_") and value.islower():
                with self.subTest(value):
                    self.assertIn(value, description)


if __name__ == "__main__":
    unittest.main()
