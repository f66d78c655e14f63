"""A real framework backend for tests/request_attributes.rs: Flask or Django, served by
Werkzeug's threaded WSGI server on 127.0.0.1:<port>.

    python app.py flask|django <port>

Prints "ready <port>" once listening. Both frameworks answer the same views:

- /login (POST), /items (GET, so HEAD too), /v1/completions (GET, POST): JSON
  {"method": <method as the framework sees it>, "model": <query parameter "model" as the framework
  reads it>, "view": <view name>}; a HEAD gets the headers only.
- /hits: JSON {"<view> <method>": count} of every view run so far (as the framework saw it).

Flask (Werkzeug) and Django both upper-case the method and route HEAD to the GET view; Flask reads
the first value of a repeated query parameter, Django the last.
"""

import json
import sys
import threading
from collections import Counter

from werkzeug.serving import make_server

HITS = Counter()
LOCK = threading.Lock()


def hit(view, method):
    with LOCK:
        HITS[f"{view} {method}"] += 1


def flask_app():
    from flask import Flask, jsonify, request

    app = Flask("backend")

    def view(name):
        hit(name, request.method)
        return jsonify(method=request.method, model=request.args.get("model"), view=name)

    app.add_url_rule("/login", "login", lambda: view("login"), methods=["POST"])
    app.add_url_rule("/items", "items", lambda: view("items"), methods=["GET"])
    app.add_url_rule(
        "/v1/completions", "completions", lambda: view("completions"), methods=["GET", "POST"]
    )
    app.add_url_rule("/hits", "hits", lambda: jsonify(dict(HITS)))
    return app


def django_app():
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        SECRET_KEY="tollgate-test-backend",
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
    )
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpResponseNotAllowed, JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    def make(name, allowed):
        @csrf_exempt
        def view(request):
            # Django serves HEAD with its GET view (as its class-based views and most apps do).
            method = "GET" if request.method == "HEAD" else request.method
            if method not in allowed:
                return HttpResponseNotAllowed(allowed)
            hit(name, request.method)
            return JsonResponse(
                {"method": request.method, "model": request.GET.get("model"), "view": name}
            )

        return view

    def hits(request):
        return JsonResponse(dict(HITS))

    global urlpatterns
    urlpatterns = [
        path("login", make("login", ["POST"])),
        path("items", make("items", ["GET"])),
        path("v1/completions", make("completions", ["GET", "POST"])),
        path("hits", hits),
    ]
    return get_wsgi_application()


def main():
    kind, port = sys.argv[1], int(sys.argv[2])
    app = flask_app() if kind == "flask" else django_app()
    server = make_server("127.0.0.1", port, app, threaded=True)
    print(f"ready {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
