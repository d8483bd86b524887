"""One rule names every operation in the OpenAPI document: the route function's name in camelCase.

`create_environment` becomes `createEnvironment`, `preview_deployment` becomes `previewDeployment`:
short, stable as long as the function keeps its name, and what a generated client names its
methods after. Function names are unique across the routers (a test lists them all).
"""

from __future__ import annotations

from fastapi.routing import APIRoute


def operation_id(route: APIRoute) -> str:
    return camel_case(route.name)


def camel_case(function_name: str) -> str:
    first, *rest = function_name.split("_")
    return first + "".join(word.capitalize() for word in rest)
