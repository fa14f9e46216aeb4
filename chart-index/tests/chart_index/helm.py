"""Helm's own client code, for tests/chart_index/helm.rs.

One Helm action per run, through helm-python-sdk (`helm_python`: ctypes
over libhelm_c, a C ABI over Helm's Go SDK; no helm binary). Prints the
result as one JSON document on stdout; on a Helm error prints
`helm: ERROR: message` on stderr and exits 1. Helm's own directories
(HELM_CACHE_HOME and the like) are the caller's to set.

    helm.py version
    helm.py package CHART_DIR DEST_DIR [VERSION]  -> {"path": ...}
    helm.py digest FILE                           -> {"digest": "sha256:..."}
    helm.py index REPO_URL                        -> the index as Helm loads it
    helm.py pull REPO_URL NAME VERSION DEST_DIR   -> {"files": [...]}
    helm.py dependency-update CHART_DIR           -> {"charts": [...]}
    helm.py generate DIR BASE_URL                 -> `helm repo index DIR --url BASE_URL`
    helm.py lint CHART_DIR VALUES_JSON            -> `helm lint --strict`'s report
    helm.py render CHART_DIR VALUES_JSON          -> {template: [manifest, ...] or NOTES text}

`render` renders offline as `helm template` does (release `ci` in the
namespace `ns`), and reads each manifest back with Helm's own YAML
reader; a template rendering nothing gives [].
"""

import json
import os
import re
import sys

import helm_python as helm


def run(action, args):
    if action == "version":
        return {"sdk": helm.helm_sdk_version(), "helm_c": helm.helm_c_version()}
    if action == "package":
        chart_dir, dest = args[0], args[1]
        version = args[2] if len(args) > 2 else None
        return {"path": helm.package(chart_dir, destination=dest, version=version)}
    if action == "digest":
        return {"digest": helm.digest(args[0])}
    if action == "index":
        return helm.repo_index(args[0])
    if action == "pull":
        repo_url, name, version, dest = args
        os.makedirs(dest, exist_ok=True)
        helm.pull(name, repo_url=repo_url, version=version, destination=dest)
        return {"files": sorted(os.listdir(dest))}
    if action == "dependency-update":
        helm.dependency_update(args[0])
        return {"charts": sorted(os.listdir(os.path.join(args[0], "charts")))}
    if action == "generate":
        return helm.repo_index_generate(args[0], base_url=args[1])
    if action == "lint":
        return helm.lint(args[0], json.loads(args[1]), strict=True)
    if action == "render":
        chart = helm.Chart.load(args[0])
        rendered = chart.render(json.loads(args[1]), name="ci", namespace="ns", is_install=True)
        return {path: manifests(path, text) for path, text in rendered.items()}
    raise SystemExit(f"helm.py: unknown action {action!r}")


def manifests(path, text):
    """A template's manifests (each YAML document, as Helm reads it), or
    the text of one that is not YAML (NOTES.txt)."""
    if not path.endswith((".yaml", ".yml")):
        return text
    docs = re.split(r"^---[ \t]*$", text, flags=re.MULTILINE)
    return [m for m in (helm.values_from_yaml(d) for d in docs if d.strip()) if m]


def main():
    try:
        result = run(sys.argv[1], sys.argv[2:])
    except helm.HelmError as e:
        print(f"helm: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
