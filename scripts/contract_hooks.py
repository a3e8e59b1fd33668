"""Schemathesis hooks for scripts/contract.sh.

A few rules of the admin API relate one field to another (or to the path), which JSON Schema
cannot state; src/admin/openapi.json states them in prose, and the server answers 422 when they
are broken. Schemathesis generates its "valid" requests from the schemas alone, so for those
requests only (the positive ones) these hooks make the generated data follow the prose rules as
well. They never touch a request generated to be invalid, and they relax no check.
"""

import schemathesis


def _positive(case):
    meta = case.meta
    return meta is not None and meta.generation.mode.is_positive


def _without_braces(text):
    # A brace starts a placeholder, which must name a declared argument or template variable.
    return text.replace("{", "(").replace("}", ")")


@schemathesis.hook
def map_case(context, case):
    if not _positive(case):
        return case
    # If-Match names the record's current revision, which only the server knows (any other
    # entity tag is answered 412): a positive request asks for whichever revision is current.
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "if-match":
            headers[name] = "*"
    body = case.body
    if not isinstance(body, dict):
        return case
    path = case.operation.path
    params = case.path_parameters or {}
    # PUT …/{name}: the body names the entry at the path (a rename is a new entry).
    if case.method.upper() == "PUT" and isinstance(params.get("name"), str) and "name" in body:
        body["name"] = params["name"]
    if path.startswith("/tenants/{slug}/prompts"):
        # Each argument name at most once; `{{placeholder}}` only for declared arguments.
        arguments = body.get("arguments")
        if isinstance(arguments, list):
            seen = set()
            unique = []
            for argument in arguments:
                name = argument.get("name") if isinstance(argument, dict) else None
                if isinstance(name, str):
                    if name in seen:
                        continue
                    seen.add(name)
                unique.append(argument)
            body["arguments"] = unique
        for message in body.get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("text"), str):
                message["text"] = _without_braces(message["text"])
    if path.startswith("/tenants/{slug}/tools"):
        # The schemas must compile as JSON Schemas: a generated property schema may not (its
        # keywords hold any values), so each is the empty schema (any value).
        for field in ("input_schema", "output_schema"):
            schema = body.get(field)
            if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
                schema["properties"] = {name: {} for name in schema["properties"]}
    if path.startswith("/tenants/{slug}/resource-templates"):
        # The resolver's `{placeholder}`s must be variables of the URI template.
        resolver = body.get("resolver")
        if isinstance(resolver, dict) and isinstance(resolver.get("text"), str):
            resolver["text"] = _without_braces(resolver["text"])
    case.body = body
    return case
