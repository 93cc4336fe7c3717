"""Validates a document against a schema with many local $refs, as jsonschema issue #853 did
with the OpenAPI 3.0 schema: 4.0 resolves each reference by scanning the whole schema."""

import jsonschema

N_DEFS = 40
ITERATIONS = 200

definitions = {
    f"item{i}": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "size": {"type": "integer", "minimum": 0},
            "next": {"$ref": f"#/definitions/item{(i + 1) % N_DEFS}"},
        },
    }
    for i in range(N_DEFS)
}
schema = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": definitions,
    "type": "array",
    "items": {"$ref": "#/definitions/item0"},
}


def chain(depth):
    node = {"name": "leaf", "size": 1}
    for _ in range(depth):
        node = {"name": "n", "size": 2, "next": node}
    return node


document = [chain(30) for _ in range(5)]


def main():
    validator = jsonschema.Draft7Validator(schema)
    for _ in range(ITERATIONS):
        validator.validate(document)


main()
print(jsonschema.__version__)
