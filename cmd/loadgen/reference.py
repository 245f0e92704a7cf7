"""The lessons' send_message behind a minimal HTTP server (loadgen phase r).

The lesson's functions are loaded at run time from the file named by
--lesson, a Python file defining member_name, load_inbox, save_inbox and
send_message; none of their code is in this repository. The server adds
only what HTTP needs around them, so that loadgen can compare Mailroom's
sends per second with the lesson's under the same clients:

  POST /teams/{team}/messages  {"to": ..., "body": ...}
      send_message(directory, members, 'reader', to, body, lock), the
      members lead, reader and reviewer, one RLock and one directory per
      team; 201 with the lesson's receipt. The lesson refuses a letter to
      an inbox that holds 8; then the team moves on to a fresh directory
      and the send is retried once there, so the cost measured stays the
      lesson's own function's. Any other refusal: 400.
  GET /healthz  200

It prints "listening on http://HOST:PORT" once it listens (--port 0: a
port the system picks) and stops on SIGTERM or SIGINT.
"""

import argparse
import json
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MEMBERS = ('lead', 'reader', 'reviewer')
SENDER = 'reader'
INBOX_LETTERS = 8  # the lesson's bound on an inbox
MAX_BODY = 1 << 20
PATH = re.compile(r'/teams/([a-z0-9][a-z0-9-]{0,63})/messages')
NEEDED = ('member_name', 'load_inbox', 'save_inbox', 'send_message')

lesson = {}


class Team:
    """One team: its lock, and the directory its inboxes are in now."""

    def __init__(self, root):
        self.lock = threading.RLock()
        self.root = root
        self.generation = 0

    def directory(self):
        return os.path.join(self.root, str(self.generation))

    def send(self, to, body):
        # The team's lock is held across the retry, so that no other
        # sender sees the directory change half way; it is the lesson's
        # own lock (an RLock), which send_message takes again inside.
        with self.lock:
            try:
                return lesson['send_message'](self.directory(), MEMBERS, SENDER, to, body, self.lock)
            except ValueError:
                if len(lesson['load_inbox'](self.directory(), to, MEMBERS)) < INBOX_LETTERS:
                    raise
            self.generation += 1
            return lesson['send_message'](self.directory(), MEMBERS, SENDER, to, body, self.lock)


class Teams:
    def __init__(self, root):
        self.root = root
        self.lock = threading.Lock()
        self.teams = {}

    def get(self, name):
        with self.lock:
            team = self.teams.get(name)
            if team is None:
                team = self.teams[name] = Team(os.path.join(self.root, name))
            return team


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'  # keep-alive, as Mailroom's clients use

    def do_GET(self):
        if self.path == '/healthz':
            self.reply(200, {'status': 'ok'})
        else:
            self.reply(404, {'error': 'no such path'})

    def do_POST(self):
        try:
            length = int(self.headers.get('Content-Length', '0'))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self.reply(413, {'error': 'body too large or no length'})
            return
        raw = self.rfile.read(length)
        match = PATH.fullmatch(self.path)
        if match is None:
            self.reply(404, {'error': 'no such path'})
            return
        try:
            request = json.loads(raw)
            to, body = request['to'], request['body']
        except (ValueError, TypeError, KeyError) as err:
            self.reply(400, {'error': 'bad request: ' + str(err)})
            return
        try:
            receipt = self.server.teams.get(match.group(1)).send(to, body)
        except Exception as err:  # the lesson's refusals are ValueErrors; any other is a 400 too
            self.reply(400, {'error': str(err)})
            return
        self.reply(201, receipt)

    def reply(self, status, doc):
        data = json.dumps(doc, ensure_ascii=False).encode('utf-8')
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass  # one line per request would cost more than the send


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 64 clients connect at once


def load_lesson(path):
    with open(path, encoding='utf-8') as f:
        source = f.read()
    namespace = {'__name__': 'lesson'}
    exec(compile(source, path, 'exec'), namespace)
    missing = [name for name in NEEDED if not callable(namespace.get(name))]
    if missing:
        raise SystemExit(f'{path}: does not define {", ".join(missing)}')
    lesson.update(namespace)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--lesson', required=True, help='Python file defining the lesson functions')
    parser.add_argument('--root', required=True, help='directory the teams\' inboxes go in')
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=0)
    args = parser.parse_args()
    load_lesson(args.lesson)
    server = Server((args.host, args.port), Handler)
    server.teams = Teams(args.root)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f'listening on http://{args.host}:{server.server_address[1]}', flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == '__main__':
    main()
