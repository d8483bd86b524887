"""The request path, from the socket to a route and back: the edge every request meets (request
id, body size, rate budget, input checks, its body read once and its credential resolved once),
what a route declares (its least role, its session), how it runs in its unit of work, and how
errors, JSON answers, ETags, query strings and the OpenAPI document are made. It knows no area:
the app gives it what it needs of them (service.app)."""
