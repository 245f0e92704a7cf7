"""Check that an inbox file reads back under the lessons' reading rules.

Usage: check_inbox.py FILE RECIPIENT MAX_MESSAGES MEMBER[,MEMBER...]

The lessons' loader splits the decoded text with str.splitlines(), which
also breaks lines at U+0085, U+2028, U+2029 and a few control characters,
and then requires every line to be one JSON object with exactly the keys
id, sender, recipient and body. This checker applies the same reading, so
a file it accepts is one the lessons' code can read. On success it prints
the records as a JSON array; on failure it prints the reason and exits 1.
"""

import json
import sys

KEYS = {"id", "sender", "recipient", "body"}


def check(path, recipient, limit, members):
    with open(path, "rb") as stream:
        text = stream.read().decode("utf-8")
    records = [json.loads(piece) for piece in text.splitlines()]
    if len(records) > limit:
        raise ValueError("too many records: %d" % len(records))
    for position, record in enumerate(records, start=1):
        if not isinstance(record, dict) or set(record.keys()) != KEYS:
            raise ValueError("record %d: wrong keys" % position)
        if record["id"] != "%s-%d" % (recipient, position):
            raise ValueError("record %d: wrong id %r" % (position, record["id"]))
        if record["recipient"] != recipient:
            raise ValueError("record %d: wrong recipient" % position)
        if record["sender"] not in members:
            raise ValueError("record %d: unknown sender" % position)
        body = record["body"]
        if not isinstance(body, str) or not 0 < len(body) <= 600:
            raise ValueError("record %d: body length" % position)
    return records


def main():
    path, recipient, limit, members = sys.argv[1:5]
    try:
        records = check(path, recipient, int(limit), set(members.split(",")))
    except ValueError as problem:  # json.JSONDecodeError and UnicodeDecodeError included
        print(problem)
        return 1
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
