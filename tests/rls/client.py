"""A real gRPC client of Envoy's rate limit service (v3) for the decision-service tests.

The messages are declared here from the public API definition (envoy/service/ratelimit/v3/
rls.proto and envoy/extensions/common/ratelimit/v3/ratelimit.proto, field numbers as published),
built at run time with protobuf's descriptor API, so no protoc is needed. Only the fields the
tests use are declared; protobuf skips the others.

Usage: client.py HOST:PORT, then one JSON command per stdin line, one JSON answer per stdout line:
  {"domain": "d", "hits_addend": 0, "descriptors": [{"entries": [["k", "v"]], "hits_addend": 3}]}
      -> {"code": "OK", "response": {...}} or {"code": "INVALID_ARGUMENT", "details": "..."}
      (optional "metadata": [["traceparent", "00-..."], ...] is sent with the call)
  {"raw": "<hex>"}      the bytes sent as the request message as they are (malformed protobuf)
  {"streams": N, "domain": ..., "descriptors": ...}  N calls at once on one channel
      -> {"codes": {"OK": n, ...}}
"""

import json
import sys
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

F = descriptor_pb2.FieldDescriptorProto


def field(msg, name, number, kind, label=F.LABEL_OPTIONAL, type_name=None):
    f = msg.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = type_name


def build():
    fd = descriptor_pb2.FileDescriptorProto(
        name="tollgate_test_rls.proto", package="envoy.service.ratelimit.v3", syntax="proto3"
    )
    p = ".envoy.service.ratelimit.v3."
    u64 = fd.message_type.add(name="UInt64Value")
    field(u64, "value", 1, F.TYPE_UINT64)
    dur = fd.message_type.add(name="Duration")
    field(dur, "seconds", 1, F.TYPE_INT64)
    field(dur, "nanos", 2, F.TYPE_INT32)
    hv = fd.message_type.add(name="HeaderValue")
    field(hv, "key", 1, F.TYPE_STRING)
    field(hv, "value", 2, F.TYPE_STRING)
    d = fd.message_type.add(name="RateLimitDescriptor")
    e = d.nested_type.add(name="Entry")
    field(e, "key", 1, F.TYPE_STRING)
    field(e, "value", 2, F.TYPE_STRING)
    field(d, "entries", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, p + "RateLimitDescriptor.Entry")
    field(d, "hits_addend", 3, F.TYPE_MESSAGE, type_name=p + "UInt64Value")
    req = fd.message_type.add(name="RateLimitRequest")
    field(req, "domain", 1, F.TYPE_STRING)
    field(req, "descriptors", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, p + "RateLimitDescriptor")
    field(req, "hits_addend", 3, F.TYPE_UINT32)
    resp = fd.message_type.add(name="RateLimitResponse")
    code = resp.enum_type.add(name="Code")
    for i, n in enumerate(["UNKNOWN", "OK", "OVER_LIMIT"]):
        code.value.add(name=n, number=i)
    rl = resp.nested_type.add(name="RateLimit")
    unit = rl.enum_type.add(name="Unit")
    for i, n in enumerate(["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK"]):
        unit.value.add(name=n, number=i)
    field(rl, "requests_per_unit", 1, F.TYPE_UINT32)
    field(rl, "unit", 2, F.TYPE_ENUM, type_name=p + "RateLimitResponse.RateLimit.Unit")
    field(rl, "name", 3, F.TYPE_STRING)
    st = resp.nested_type.add(name="DescriptorStatus")
    field(st, "code", 1, F.TYPE_ENUM, type_name=p + "RateLimitResponse.Code")
    field(st, "current_limit", 2, F.TYPE_MESSAGE, type_name=p + "RateLimitResponse.RateLimit")
    field(st, "limit_remaining", 3, F.TYPE_UINT32)
    field(st, "duration_until_reset", 4, F.TYPE_MESSAGE, type_name=p + "Duration")
    field(resp, "overall_code", 1, F.TYPE_ENUM, type_name=p + "RateLimitResponse.Code")
    field(resp, "statuses", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, p + "RateLimitResponse.DescriptorStatus")
    field(resp, "response_headers_to_add", 3, F.TYPE_MESSAGE, F.LABEL_REPEATED, p + "HeaderValue")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
    return get("envoy.service.ratelimit.v3.RateLimitRequest"), get(
        "envoy.service.ratelimit.v3.RateLimitResponse"
    )


Request, Response = build()
PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def request_of(cmd):
    r = Request(domain=cmd.get("domain", ""), hits_addend=cmd.get("hits_addend", 0))
    for d in cmd.get("descriptors", []):
        m = r.descriptors.add()
        for k, v in d["entries"]:
            m.entries.add(key=k, value=v)
        if "hits_addend" in d:
            m.hits_addend.value = d["hits_addend"]
    return r


def answer(call):
    try:
        resp = call()
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details()}
    as_dict = json_format.MessageToDict(
        resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return {"code": "OK", "response": as_dict}


def main():
    channel = grpc.insecure_channel(sys.argv[1])
    typed = channel.unary_unary(
        PATH, request_serializer=Request.SerializeToString, response_deserializer=Response.FromString
    )
    raw = channel.unary_unary(PATH, request_serializer=lambda b: b, response_deserializer=Response.FromString)
    for line in sys.stdin:
        cmd = json.loads(line)
        if "raw" in cmd:
            out = answer(lambda: raw(bytes.fromhex(cmd["raw"]), timeout=30))
        elif "streams" in cmd:
            req = request_of(cmd)
            calls = [typed.future(req, timeout=60) for _ in range(cmd["streams"])]
            codes = {}
            for c in calls:
                try:
                    c.result()
                    name = "OK"
                except grpc.RpcError as e:
                    name = e.code().name
                codes[name] = codes.get(name, 0) + 1
            out = {"codes": codes}
        else:
            metadata = [tuple(p) for p in cmd.get("metadata", [])]
            out = answer(lambda: typed(request_of(cmd), timeout=30, metadata=metadata))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
