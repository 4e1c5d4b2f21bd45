"""Synthetic repositories, file contents and task definitions.

The generator needs code bases to search: :data:`REPOS` holds a few small, realistic
file trees (Django, Kafka, Istio, llama.cpp, and the three repositories of a cross-repo
Envoy task). File contents are made up on demand, deterministically, from per-language
line pools, so reading a file twice gives the same text and nothing is stored on disk.

:func:`build_task` turns a task index into a :class:`TaskSpec` (name, suite, ground
truth) and :func:`write_task_definition` writes its folder(s) under ``benchmarks/`` in
the shape of real CodeScaleBench tasks, with one of eleven ground-truth kinds
(:data:`GT_KINDS`).
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "GT_KINDS",
    "REPOS",
    "GroundTruthChunk",
    "RepoProfile",
    "TaskSpec",
    "build_task",
    "file_lines",
    "gt_key",
    "patch_hunks",
    "total_lines",
    "write_task_definition",
]


@dataclass(frozen=True)
class RepoProfile:
    """A synthetic code base: its names, language and file tree."""

    short: str
    """Short name, also the workspace folder in multi-repo tasks (``django``)."""
    sg_repo: str
    """Sourcegraph repository name (``github.com/sg-evals/django--674eda1c``)."""
    upstream: str
    """Upstream ``org/name`` as written in ``task.toml``."""
    language: str
    revision: str
    files: tuple[str, ...]
    symbols: tuple[str, ...]


def _repo(short: str, upstream: str, language: str, revision: str, files: str, symbols: str):
    return RepoProfile(
        short=short,
        sg_repo=f"github.com/sg-evals/{short}--{revision[:8]}",
        upstream=upstream,
        language=language,
        revision=revision,
        files=tuple(files.split()),
        symbols=tuple(symbols.split()),
    )


REPOS: dict[str, RepoProfile] = {
    profile.short: profile
    for profile in (
        _repo(
            "django",
            "django/django",
            "python",
            "674eda1c03a3187905f48afee0f15226aa62fdf3",
            """
            django/contrib/admin/options.py django/contrib/admin/filters.py
            django/contrib/admin/views/main.py django/contrib/admin/checks.py
            django/contrib/admin/helpers.py django/contrib/admin/sites.py
            django/contrib/admin/utils.py django/contrib/admin/widgets.py
            django/contrib/auth/models.py django/contrib/auth/backends.py
            django/db/models/query.py django/db/models/base.py
            django/db/models/fields/__init__.py django/db/models/sql/compiler.py
            django/core/handlers/base.py django/core/paginator.py django/forms/models.py
            django/forms/fields.py django/utils/functional.py django/http/request.py
            tests/admin_changelist/admin.py tests/admin_changelist/tests.py
            tests/admin_changelist/models.py tests/modeladmin/tests.py
            tests/admin_filters/tests.py tests/admin_views/admin.py tests/queries/tests.py
            tests/forms_tests/tests/test_forms.py docs/ref/contrib/admin/index.txt
            docs/releases/1.5.txt docs/releases/4.2.txt docs/topics/db/queries.txt
            docs/ref/models/querysets.txt AUTHORS README.rst
            """,
            """get_list_filter get_search_results lookup_allowed get_queryset
            formfield_for_dbfield get_paginator get_changelist_instance has_view_permission""",
        ),
        _repo(
            "kafka",
            "apache/kafka",
            "java",
            "0f6f3a9c5e2d41b7a8c9d0e1f2a3b4c5d6e7f809",
            """
            clients/src/main/java/org/apache/kafka/clients/consumer/KafkaConsumer.java
            clients/src/main/java/org/apache/kafka/clients/consumer/ConsumerConfig.java
            clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java
            clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java
            clients/src/main/java/org/apache/kafka/clients/producer/internals/RecordAccumulator.java
            clients/src/main/java/org/apache/kafka/clients/producer/internals/Sender.java
            clients/src/main/java/org/apache/kafka/common/network/Selector.java
            clients/src/main/java/org/apache/kafka/common/utils/Utils.java
            clients/src/main/java/org/apache/kafka/common/record/MemoryRecords.java
            core/src/main/scala/kafka/server/KafkaApis.scala
            core/src/main/scala/kafka/server/ReplicaManager.scala
            core/src/main/scala/kafka/log/UnifiedLog.scala
            storage/src/main/java/org/apache/kafka/storage/internals/log/LogSegment.java
            storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java
            clients/src/test/java/org/apache/kafka/clients/producer/KafkaProducerTest.java
            clients/src/test/java/org/apache/kafka/clients/producer/internals/RecordAccumulatorTest.java
            clients/src/test/java/org/apache/kafka/clients/consumer/KafkaConsumerTest.java
            core/src/test/scala/unit/kafka/server/KafkaApisTest.scala
            docs/upgrade.html docs/ops.html config/server.properties README.md
            """,
            """drainBatchesForOneNode maybeUpdateMetadata ensureValid appendRecords
            handleProduceRequest sendProducerData partitionReady commitSync""",
        ),
        _repo(
            "istio",
            "istio/istio",
            "go",
            "4c1f845d8e0b7a6c5d4e3f2a1b0c9d8e7f6a5b4c",
            """
            pilot/pkg/xds/rds.go pilot/pkg/xds/cds.go pilot/pkg/xds/eds.go
            pilot/pkg/xds/ads.go pilot/pkg/xds/discovery.go pilot/pkg/xds/debug.go
            pilot/pkg/networking/core/httproute.go pilot/pkg/networking/core/gateway.go
            pilot/pkg/networking/core/configgen.go pilot/pkg/networking/core/listener.go
            pilot/pkg/networking/core/route/route.go pilot/pkg/networking/core/route/route_test.go
            pilot/pkg/networking/grpcgen/rds.go pilot/pkg/model/push_context.go
            pilot/pkg/model/sidecar.go pilot/test/xdstest/extract.go
            pkg/config/schema/kind/resources.gen.go pkg/util/sets/set.go
            pkg/kube/client.go operator/cmd/mesh/install.go Makefile.core.mk README.md
            """,
            """BuildHTTPRoutes buildSidecarOutboundHTTPRouteConfig ExtractRouteConfigurations
            PushContext ConfigGenerator buildGatewayHTTPRouteConfig""",
        ),
        _repo(
            "llama.cpp",
            "ggerganov/llama.cpp",
            "cpp",
            "56399714a1b2c3d4e5f60718293a4b5c6d7e8f90",
            """
            src/llama.cpp src/llama-context.cpp src/llama-model.cpp src/llama-vocab.cpp
            src/llama-kv-cache.cpp src/llama-sampling.cpp src/llama-batch.cpp
            common/common.cpp common/common.h common/arg.cpp common/sampling.cpp
            examples/main/main.cpp examples/server/server.cpp examples/perplexity/perplexity.cpp
            ggml/src/ggml.c ggml/src/ggml-backend.cpp ggml/include/ggml.h include/llama.h
            convert_hf_to_gguf.py tests/test-tokenizer-0.cpp tests/test-sampling.cpp
            docs/build.md README.md CMakeLists.txt
            """,
            """llama_n_ctx llama_decode llama_batch_add llama_kv_cache_clear
            llama_sampler_sample common_tokenize llama_rope_freq_scale""",
        ),
        _repo(
            "go-control-plane",
            "envoyproxy/go-control-plane",
            "go",
            "9b2e7d1a0c3f4e5d6a7b8c9d0e1f2a3b4c5d6e7f",
            """
            envoy/config/route/v3/route.pb.go envoy/config/route/v3/route_components.pb.go
            envoy/config/route/v3/route.pb.validate.go envoy/config/cluster/v3/cluster.pb.go
            envoy/config/listener/v3/listener.pb.go envoy/service/discovery/v3/discovery.pb.go
            pkg/cache/v3/snapshot.go pkg/cache/v3/simple.go pkg/server/v3/server.go
            pkg/resource/v3/resource.go README.md
            """,
            """RouteConfiguration VirtualHost GetVirtualHosts NewSnapshot""",
        ),
        _repo(
            "data-plane-api",
            "envoyproxy/data-plane-api",
            "protobuf",
            "e3c1a9b7d5f3e1c9a7b5d3f1e9c7a5b3d1f9e7c5",
            """
            envoy/config/route/v3/route.proto envoy/config/route/v3/route_components.proto
            envoy/config/cluster/v3/cluster.proto envoy/config/listener/v3/listener.proto
            envoy/service/route/v3/rds.proto envoy/service/discovery/v3/discovery.proto
            api/bazel/repository_locations.bzl docs/root/api-v3/config/route/route.rst
            README.md
            """,
            """RouteConfiguration VirtualHost RouteDiscoveryService""",
        ),
    )
}

#: Repositories of the cross-repo (org) tasks, in workspace order.
ORG_REPOS: tuple[str, ...] = ("istio", "go-control-plane", "data-plane-api")

_LINE_POOLS: dict[str, tuple[str, ...]] = {
    "python": tuple(
        """import copy
from functools import partial, update_wrapper
from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ValidationError

class BaseAdminMixin:
    \"\"\"Shared behaviour for admin classes.\"\"\"

    def __init__(self, model, admin_site):
        self.model = model
        self.opts = model._meta
        self.admin_site = admin_site
        super().__init__()

    def get_urls(self):
        from django.urls import path
        info = self.opts.app_label, self.opts.model_name
        return [path("", self.changelist_view, name="%s_%s_changelist" % info)]

    def has_change_permission(self, request, obj=None):
        opts = self.opts
        codename = get_permission_codename("change", opts)
        return request.user.has_perm("%s.%s" % (opts.app_label, codename))
        if obj is None:
            return True
        queryset = queryset.filter(pk__in=pks)
        return queryset, may_have_duplicates
        for field_name in self.list_display:
            try:
                field = self.opts.get_field(field_name)
            except FieldDoesNotExist:
                continue
        # Fall back to the default ordering of the model.
        ordering = list(self.ordering or ())
        return ordering
        raise ValidationError(self.error_messages["invalid"], code="invalid")
        self.assertEqual(response.status_code, 200)
        self.assertIs(ma.has_module_permission(request), True)
""".splitlines()
    ),
    "java": tuple(
        """package org.apache.kafka.clients.producer.internals;

import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.TopicPartition;

public class RecordBatchHandler {
    private static final Logger log = LoggerFactory.getLogger(RecordBatchHandler.class);
    private final Time time;
    private final int batchSize;

    public RecordBatchHandler(int batchSize, Time time) {
        this.batchSize = batchSize;
        this.time = time;
    }

    @Override
    public String toString() {
        return "RecordBatchHandler(batchSize=" + batchSize + ")";
    }
        if (batch == null || batch.isClosed()) {
            continue;
        }
        List<ProducerBatch> ready = new ArrayList<>();
        long now = time.milliseconds();
        synchronized (deque) {
            ProducerBatch first = deque.peekFirst();
            if (first == null) return ready;
        }
        throw new IllegalStateException("Unexpected state " + state);
        assertEquals(1, accum.ready(metadataCache, now).readyNodes.size());
""".splitlines()
    ),
    "go": tuple(
        """package core

import (
\t"fmt"
\t"sort"

\troute "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// ConfigGenerator builds xDS resources for a proxy.
type ConfigGenerator interface {
\tBuildListeners(node *model.Proxy, push *model.PushContext) []*listener.Listener
}

func (configgen *ConfigGeneratorImpl) buildRoutes(node *model.Proxy, req *model.PushRequest) []*route.RouteConfiguration {
\tout := make([]*route.RouteConfiguration, 0, len(req.Push.ServiceIndex))
\tfor _, name := range routeNames {
\t\trc := &route.RouteConfiguration{Name: name}
\t\tif rc == nil {
\t\t\tcontinue
\t\t}
\t\tout = append(out, rc)
\t}
\tsort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
\treturn out
}
\tif err := r.UnmarshalTo(u); err != nil {
\t\treturn fmt.Errorf("unmarshal route: %v", err)
\t}
""".splitlines()
    ),
    "cpp": tuple(
        """#include "llama-context.h"
#include "llama-impl.h"

#include <cstring>
#include <stdexcept>

// llama_context

llama_context::llama_context(const llama_model & model, llama_context_params params)
    : model(model), cparams(params) {
    LLAMA_LOG_INFO("%s: constructing llama_context\\n", __func__);
    const auto & hparams = model.hparams;
    cparams.n_ctx = params.n_ctx == 0 ? hparams.n_ctx_train : params.n_ctx;
}

uint32_t llama_context::n_ctx() const {
    return cparams.n_ctx;
}
    if (batch.n_tokens == 0) {
        LLAMA_LOG_ERROR("%s: n_tokens == 0\\n", __func__);
        return -1;
    }
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        const llama_token tok = batch.token[i];
        GGML_ASSERT(tok >= 0 && tok < n_vocab);
    }
    const float freq_scale = cparams.rope_freq_scale;
""".splitlines()
    ),
    "protobuf": tuple(
        """syntax = "proto3";

package envoy.config.route.v3;

import "envoy/config/core/v3/base.proto";
import "google/protobuf/wrappers.proto";

option java_package = "io.envoyproxy.envoy.config.route.v3";
option go_package = "github.com/envoyproxy/go-control-plane/envoy/config/route/v3;routev3";

// [#protodoc-title: HTTP route configuration]
// * Routing :ref:`architecture overview <arch_overview_http_routing>`

message Vhds {
  // Configuration source specifier for VHDS.
  core.v3.ConfigSource config_source = 1 [(validate.rules).message = {required: true}];
}
  // The name of the route configuration.
  string name = 1;
  repeated VirtualHost virtual_hosts = 2;
  google.protobuf.BoolValue validate_clusters = 7;
""".splitlines()
    ),
    "text": tuple(
        """=======================
Release notes
=======================

This document describes changes in the admin and the public API.

Backwards incompatible changes
==============================

* The method now receives the ``request`` argument and may return a list or tuple.
* Custom subclasses that override it must accept the new signature.

Features
--------

The changelist supports filtering on related fields through ``list_filter``.
See :ref:`the reference <admin-ref>` for the details of each option.
""".splitlines()
    ),
}

_SYMBOL_LINES: dict[str, str] = {
    "python": "    def {symbol}(self, request):",
    "java": "    public void {symbol}(final long nowMs) {{",
    "go": "func (configgen *ConfigGeneratorImpl) {symbol}(node *model.Proxy) []*route.RouteConfiguration {{",
    "cpp": "int32_t {symbol}(struct llama_context * ctx) {{",
    "protobuf": "message {symbol} {{",
    "text": "* :meth:`ModelAdmin.{symbol}` was added.",
}

_TEXT_SUFFIXES = (".txt", ".rst", ".md", ".html", ".properties", ".mk", ".bzl")


def _file_language(profile: RepoProfile, path: str) -> str:
    if path.endswith(_TEXT_SUFFIXES) or "." not in path.rsplit("/", 1)[-1]:
        return "text"
    if path.endswith(".py"):
        return "python"
    if path.endswith((".java", ".scala")):
        return "java"
    if path.endswith(".go"):
        return "go"
    if path.endswith((".c", ".cpp", ".h")):
        return "cpp"
    if path.endswith(".proto"):
        return "protobuf"
    return profile.language if profile.language in _LINE_POOLS else "text"


def _stable_hash(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).encode("utf-8"))


def total_lines(profile: RepoProfile, path: str) -> int:
    """Number of lines of a synthetic file (deterministic, 60 to 2,500).

    Examples
    --------
    >>> total_lines(REPOS["django"], "AUTHORS") == total_lines(REPOS["django"], "AUTHORS")
    True
    """
    return 60 + _stable_hash(profile.short, path) % 2440


def symbol_line(profile: RepoProfile, path: str, symbol: str) -> int:
    """The line (1-based) at which ``symbol`` is mentioned in ``path``."""
    return 12 + _stable_hash(profile.short, path, symbol) % (total_lines(profile, path) - 24)


def file_lines(
    profile: RepoProfile, path: str, start: int, end: int, symbol: str | None = None
) -> list[str]:
    """Lines ``start..end`` (1-based, inclusive, clipped) of a synthetic file.

    When ``symbol`` is given, the line :func:`symbol_line` returns mentions it.

    Examples
    --------
    >>> lines = file_lines(REPOS["django"], "django/contrib/admin/options.py", 1, 3)
    >>> len(lines)
    3
    """
    language = _file_language(profile, path)
    pool = _LINE_POOLS[language]
    size = len(pool)
    last = total_lines(profile, path)
    end = min(end, last)
    offset = _stable_hash(profile.short, path) % size
    lines = [pool[(offset + i) % size] for i in range(start - 1, end)]
    if symbol is not None:
        where = symbol_line(profile, path, symbol)
        if start <= where <= end:
            lines[where - start] = _SYMBOL_LINES[language].format(symbol=symbol)
    return lines


# --------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------

#: Ground-truth kinds, cycled over task indices (``index % len(GT_KINDS)``).
GT_KINDS: tuple[str, ...] = (
    "bare_list",  # tests/ground_truth.json: a JSON list (with a duplicate entry)
    "dict",  # tests/ground_truth.json: {files, symbols, expected_edit_files}
    "org",  # tests/ground_truth.json: {files: ["repo::path"], symbols[{file, symbol, repo}]}
    "defects",  # tests/expected_defects.json: a list with line ranges
    "defects_wrapped",  # tests/expected_defects.json: {"defects": [...]}
    "expected_changes",  # tests/expected_changes.json: {expected_files}
    "reference_patch",  # tests/reference_fix.patch
    "split",  # ccb_<x>/<task>/task.toml + csb_sdlc_<x>/<task>/tests/ground_truth.json
    "solve_sh",  # solution/solve.sh with an embedded diff
    "none",  # no retrieval ground truth (a checklist verifier)
    "curator",  # tests/ground_truth_agent.json (+ chunks) with tests/ground_truth_meta.json
)

_KIND_SETUP: dict[str, tuple[str, str, str, str]] = {
    # kind: (suite, topic, reward_type, output)
    "bare_list": ("csb_sdlc_design", "impact", "f1", "submission"),
    "dict": ("csb_sdlc_feature", "filter-support", "binary", "edit"),
    "org": ("csb_org_crossrepo", "routeconfig-dep-chain", "f1", "submission"),
    "defects": ("csb_sdlc_debug", "review-defects", "f1", "review"),
    "defects_wrapped": ("csb_sdlc_test", "code-review", "f1", "review"),
    "expected_changes": ("csb_sdlc_feature", "config-option", "binary", "edit"),
    "reference_patch": ("csb_sdlc_fix", "bugfix", "binary", "edit"),
    "split": ("ccb_design", "dep-trace", "partial_credit", "submission"),
    "solve_sh": ("csb_sdlc_refactor", "rename-refactor", "binary", "edit"),
    "none": ("ccb_test", "context-window-search", "checklist", "answer"),
    "curator": ("csb_sdlc_understand", "curated-context", "f1", "submission"),
}

_KIND_REPOS: dict[str, tuple[str, ...]] = {
    "bare_list": ("django", "kafka"),
    "dict": ("django", "kafka", "istio"),
    "org": ORG_REPOS,
    "defects": ("kafka", "llama.cpp", "django"),
    "defects_wrapped": ("llama.cpp", "istio"),
    "expected_changes": ("istio", "kafka", "django"),
    "reference_patch": ("django", "llama.cpp"),
    "split": ("istio", "django"),
    "solve_sh": ("kafka", "istio", "django"),
    "none": ("llama.cpp",),
    "curator": ("kafka", "django", "istio"),
}


@dataclass(frozen=True)
class GroundTruthChunk:
    """A line range of a ground-truth file (from expected defects)."""

    repo: str
    path: str
    line_start: int
    line_end: int
    defect_type: str | None
    annotation: str | None


@dataclass
class TaskSpec:
    """One synthetic task: identity, repositories and ground truth."""

    index: int
    name: str
    kind: str
    suite: str
    task_dirs: tuple[str, ...]
    """Folders (relative to ``benchmarks/``) holding the task's files, task.toml first."""
    repos: tuple[RepoProfile, ...]
    symbol: str
    reward_type: str
    output: str
    """What the agent produces: ``submission``, ``edit``, ``review`` or ``answer``."""
    relevant: tuple[tuple[str, str], ...]
    """(repo short name, path) of the files that matter, ground truth or not."""
    edit_files: tuple[tuple[str, str], ...]
    chunks: tuple[GroundTruthChunk, ...] = ()
    gt_source: str | None = None
    gt_confidence: str | None = None
    time_limit_sec: int = 900
    instruction: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def is_org(self) -> bool:
        return self.kind == "org"

    @property
    def has_ground_truth(self) -> bool:
        return self.kind != "none"

    def key(self, repo: str, path: str) -> str:
        """Normalised ground-truth key of a file of this task (see contracts §2)."""
        return gt_key(repo, path, org=self.is_org)

    @property
    def gt_files(self) -> list[str]:
        """Normalised, deduplicated, sorted ground-truth keys (empty without ground truth)."""
        if not self.has_ground_truth:
            return []
        return sorted({self.key(r, p) for r, p in self.relevant})

    @property
    def expected_edit_keys(self) -> list[str]:
        return sorted({self.key(r, p) for r, p in self.edit_files})


def gt_key(repo: str, path: str, *, org: bool) -> str:
    """Normalised key: lowercase repo-relative path, ``repo::path`` for org tasks.

    Examples
    --------
    >>> gt_key("istio", "pilot/pkg/xds/RDS.go", org=True)
    'istio::pilot/pkg/xds/rds.go'
    """
    return f"{repo.lower()}::{path.lower()}" if org else path.lower()


#: Where each kind of ground truth is read from, and how much it is trusted.
_GT_SOURCES: dict[str, tuple[str | None, str | None]] = {
    "bare_list": ("tests/ground_truth.json", "high"),
    "dict": ("tests/ground_truth.json", "high"),
    "org": ("tests/ground_truth.json", "high"),
    "defects": ("tests/expected_defects.json", "high"),
    "defects_wrapped": ("tests/expected_defects.json", "high"),
    "expected_changes": ("tests/expected_changes.json", "high"),
    "reference_patch": ("tests/reference_fix.patch", "high"),
    "split": ("tests/ground_truth.json", "high"),
    "solve_sh": ("solution/solve.sh", "medium"),
    "none": (None, None),
    "curator": ("tests/ground_truth_agent.json", "medium"),
}


def build_task(index: int, seed: int) -> TaskSpec:
    """The task at ``index`` of a synthetic benchmark (deterministic in ``seed``).

    Examples
    --------
    >>> build_task(0, 0).kind
    'bare_list'
    """
    kind = GT_KINDS[index % len(GT_KINDS)]
    rng = random.Random(f"task:{seed}:{index}")
    suite, topic, reward_type, output = _KIND_SETUP[kind]
    candidates = _KIND_REPOS[kind]
    if kind == "org":
        repos = tuple(REPOS[name] for name in ORG_REPOS)
    else:
        repos = (REPOS[candidates[(index // len(GT_KINDS)) % len(candidates)]],)
    main = repos[0]
    symbol = rng.choice(main.symbols)
    number = index // len(GT_KINDS) + 1
    name = f"{main.short.replace('.', '')}-{topic}-{number:03d}"
    task_dirs: tuple[str, ...]
    if kind == "split":
        task_dirs = (f"ccb_design/{name}", f"csb_sdlc_design/{name}")
    else:
        task_dirs = (f"{suite}/{name}",)

    relevant = _relevant_files(rng, kind, repos)
    edit_files: tuple[tuple[str, str], ...] = ()
    if output == "edit":
        code = [rp for rp in relevant if _file_language(REPOS[rp[0]], rp[1]) != "text"]
        edit_files = tuple((code or relevant)[: max(1, min(2, len(code) or 1))])
        if kind == "dict":
            edit_files = edit_files[:1]
    chunks = _gt_chunks(rng, kind, relevant, symbol)
    gt_source, confidence = _GT_SOURCES[kind]
    if kind in ("expected_changes", "reference_patch", "solve_sh"):
        # Patch-like sources name exactly the edited files.
        relevant = list(edit_files)
    task = TaskSpec(
        index=index,
        name=name,
        kind=kind,
        suite=task_dirs[0].split("/")[0],
        task_dirs=task_dirs,
        repos=repos,
        symbol=symbol,
        reward_type=reward_type,
        output=output,
        relevant=tuple(relevant),
        edit_files=edit_files,
        chunks=chunks,
        gt_source=gt_source,
        gt_confidence=confidence,
        time_limit_sec=900 if kind != "none" else 1800,
    )
    task.instruction = _instruction(task)
    return task


def _relevant_files(
    rng: random.Random, kind: str, repos: tuple[RepoProfile, ...]
) -> list[tuple[str, str]]:
    """The task's relevant ``(repo, path)`` files: two or three per repository of an org
    task, else two to five of the one repository (code only when defects or edits)."""
    relevant: list[tuple[str, str]] = []
    if kind == "org":
        for profile in repos:
            for path in rng.sample(profile.files, 2 if profile.short != "istio" else 3):
                relevant.append((profile.short, path))
        return relevant
    main = repos[0]
    count = rng.randint(2, 5)
    pool = main.files
    if kind not in ("bare_list", "split", "none"):
        # Defects and edits live in code, not in docs.
        pool = tuple(p for p in main.files if _file_language(main, p) != "text")
    return [(main.short, path) for path in rng.sample(pool, count)]


def _gt_chunks(
    rng: random.Random, kind: str, relevant: list[tuple[str, str]], symbol: str
) -> tuple[GroundTruthChunk, ...]:
    """Line ranges of the ground truth: a defect around ``symbol`` in each relevant file,
    or (curator tasks) the symbol and its callers in the first two."""
    if kind in ("defects", "defects_wrapped"):
        made = []
        for number_in_task, (repo, path) in enumerate(relevant):
            centre = symbol_line(REPOS[repo], path, symbol)
            made.append(
                GroundTruthChunk(
                    repo,
                    path,
                    max(1, centre - rng.randint(1, 4)),
                    centre + rng.randint(2, 9),
                    rng.choice(("null-deref", "off-by-one", "race-condition", "resource-leak")),
                    f"Defect D{number_in_task + 1} around {symbol}",
                )
            )
        return tuple(made)
    if kind == "curator":
        return tuple(
            GroundTruthChunk(
                repo,
                path,
                max(1, symbol_line(REPOS[repo], path, symbol) - 2),
                symbol_line(REPOS[repo], path, symbol) + rng.randint(4, 12),
                None,
                f"{symbol} and its callers",
            )
            for repo, path in relevant[:2]
        )
    return ()


def _instruction(task: TaskSpec) -> str:
    repo = task.repos[0]
    if task.kind == "none":
        return (
            f"# Find the answer in the {repo.short} project\n\n"
            f"Find the pull request that changed how `{task.symbol}` handles the context "
            "window for llama 3.1 models. Reply with the PR number and its title.\n\n"
            "Write your answer as JSON with the keys `pr_number` and `title`.\n"
        )
    intro = {
        "submission": (
            f"List every file that defines, overrides, calls or documents `{task.symbol}` "
            "and write the repository-relative paths to `/workspace/submission.json` "
            "as a JSON array."
        ),
        "edit": (
            f"Change `{task.symbol}` as described below and update every caller so the "
            "test suite passes. Keep the public behaviour otherwise unchanged."
        ),
        "review": (
            f"Review the recent changes around `{task.symbol}`. Report each defect you find "
            "in `/workspace/review.json` as a list of objects with `file`, `line` and "
            "`description`."
        ),
    }[task.output]
    repos = ", ".join(f"`{profile.upstream}`" for profile in task.repos)
    return (
        f"# {task.name}\n\n"
        f"Repository: {repos}\n\n"
        f"## Task\n\n{intro}\n\n"
        "## Notes\n\n"
        "- Explore the code base before answering; the workspace is at `/workspace`.\n"
        "- Do not modify tests unless the task asks for it.\n"
    )


def _toml_string(value: str) -> str:
    return json.dumps(value)


def _task_toml(task: TaskSpec) -> str:
    main = task.repos[0]
    lines = [
        'version = "1.0"',
        "",
        "[metadata]",
        f"name = {_toml_string(task.name)}",
        f"description = {_toml_string(f'{task.kind} task about {task.symbol} in {main.upstream}')}",
        'license = "Apache-2.0"',
        "",
        "[task]",
        f"id = {_toml_string(task.name)}",
        f"repo = {_toml_string(main.upstream)}",
        f"category = {_toml_string(task.suite.split('_', 2)[-1])}",
        f"language = {_toml_string(main.language)}",
        f"pre_fix_rev = {_toml_string(main.revision)}",
        'difficulty = "hard"',
        f"time_limit_sec = {task.time_limit_sec}",
        "",
        "[task.metadata]",
        f"symbol = {_toml_string(task.symbol)}",
        'writable_paths = ["/workspace/"]',
        "",
        "[verification]",
        'type = "test"',
        'command = "bash /tests/test.sh"',
        f"reward_type = {_toml_string(task.reward_type)}",
        "",
        "[environment]",
        "build_timeout_sec = 900.0",
        "",
    ]
    return "\n".join(lines)


def _test_sh(task: TaskSpec) -> str:
    if task.kind == "none":
        return (
            "#!/bin/bash\n"
            "# Reward: checklist (0.0-1.0) — task-specific evaluation criteria\n"
            "set -e\n\n"
            'TRAJECTORY_PATH="${TRAJECTORY_PATH:-/logs/trajectory.jsonl}"\n'
            'OUTPUT_PATH="/logs/tac_result.json"\n\n'
            "cd /utils\n"
            'python_default /utils/eval.py --trajectory_path "$TRAJECTORY_PATH" '
            '--result_path "$OUTPUT_PATH" 2>&1 || echo \'{"score": 0}\' > "$OUTPUT_PATH"\n\n'
            "mkdir -p /logs/verifier\n"
            "SCORE=$(python3 -c \"import json; print(json.load(open('$OUTPUT_PATH')).get('score', 0))\")\n"
            'echo "$SCORE" > /logs/verifier/reward.txt\n'
        )
    return (
        "#!/bin/bash\n"
        f"# Reward: {task.reward_type} (0.0-1.0)\n"
        "set -e\n\n"
        "mkdir -p /logs/verifier\n"
        "cd /workspace\n"
        'python3 /tests/score.py > /logs/verifier/score.log 2>&1 || echo "0.0" > /logs/verifier/reward.txt\n'
    )


def patch_hunks(task: TaskSpec) -> list[tuple[str, str, int, list[str]]]:
    """``(repo, path, start, old lines)`` of the one hunk per edited file of a patch task."""
    hunks = []
    for repo, path in task.edit_files:
        profile = REPOS[repo]
        start = max(1, symbol_line(profile, path, task.symbol) - 3)
        hunks.append((repo, path, start, file_lines(profile, path, start, start + 6, task.symbol)))
    return hunks


def _diff(task: TaskSpec) -> str:
    parts = []
    for _repo, path, start, before in patch_hunks(task):
        after = list(before)
        changed = min(3, len(after) - 1)
        after[changed] = after[changed] + "  # updated"
        digest = f"{_stable_hash(path) & 0xFFFFFFF:07x}"
        parts.append(f"diff --git a/{path} b/{path}\n")
        parts.append(f"index {digest}..{digest[::-1]} 100644\n")
        parts.append(f"--- a/{path}\n+++ b/{path}\n")
        parts.append(f"@@ -{start},{len(before)} +{start},{len(after)} @@\n")
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            if i == changed:
                parts.append(f"-{old}\n+{new}\n")
            else:
                parts.append(f" {old}\n")
    return "".join(parts)


def write_task_definition(task: TaskSpec, benchmarks_root: Path) -> list[Path]:
    """Write the task's folder(s) under ``benchmarks_root``; return the files written.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     written = write_task_definition(build_task(0, 0), Path(tmp))
    >>> sorted(p.name for p in written)[:2]
    ['ground_truth.json', 'instruction.md']
    """
    main_dir = benchmarks_root / task.task_dirs[0]
    gt_dir = benchmarks_root / task.task_dirs[-1]
    files: dict[Path, str] = {
        main_dir / "task.toml": _task_toml(task),
        main_dir / "instruction.md": task.instruction,
        main_dir / "tests" / "test.sh": _test_sh(task),
    }
    files.update(_ground_truth_files(task, main_dir, gt_dir))
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        written.append(path)
    return written


def _json(value: Any) -> str:
    return json.dumps(value, indent=2) + "\n"


def _ground_truth_files(task: TaskSpec, main_dir: Path, gt_dir: Path) -> dict[Path, str]:
    """The file(s) holding the task's ground truth, in the shape of its kind."""
    tests = gt_dir / "tests"
    paths = [p for _, p in task.relevant]
    if task.kind == "bare_list":
        return {tests / "ground_truth.json": _json([*paths, paths[0]])}  # with a duplicate
    if task.kind in ("dict", "split"):
        return {tests / "ground_truth.json": _json(_files_ground_truth(task, paths))}
    if task.is_org:
        return {tests / "ground_truth.json": _json(_org_ground_truth(task))}
    if task.kind in ("defects", "defects_wrapped"):
        defects = _defects(task)
        value = {"defects": defects} if task.kind == "defects_wrapped" else defects
        return {tests / "expected_defects.json": _json(value)}
    if task.kind == "expected_changes":
        body = {
            "task_id": task.name,
            "expected_files": paths,
            "min_files_changed": len(paths),
        }
        return {tests / "expected_changes.json": _json(body)}
    if task.kind == "curator":
        return {
            tests / "ground_truth_agent.json": _json(_curator_ground_truth(task, paths)),
            tests / "ground_truth_meta.json": _json(_curator_meta(task, paths)),
        }
    if task.kind == "reference_patch":
        return {tests / "reference_fix.patch": _diff(task)}
    if task.kind == "solve_sh":
        return {main_dir / "solution" / "solve.sh": _solve_sh(task)}
    return {}


def _files_ground_truth(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth.json`` as a dict of files (with symbols and edit files for ``dict``)."""
    body: dict[str, Any] = {"files": paths}
    if task.kind == "dict":
        body["symbols"] = [
            {"file": p, "symbol": task.symbol, "repo": task.repos[0].upstream} for p in paths[:2]
        ]
        body["expected_edit_files"] = [p for _, p in task.edit_files]
    body["description"] = f"Files relevant to {task.symbol}"
    return body


def _org_ground_truth(task: TaskSpec) -> dict[str, Any]:
    """``ground_truth.json`` of a multi-repository task: ``repo::path`` keys."""
    return {
        "files": [f"{r}::{p}" for r, p in task.relevant],
        "symbols": [
            {"file": p, "symbol": REPOS[r].symbols[0], "repo": r} for r, p in task.relevant[:3]
        ],
        "description": "Dependency chain across istio, go-control-plane and data-plane-api",
    }


def _defects(task: TaskSpec) -> list[dict[str, Any]]:
    """The entries of ``expected_defects.json``, one per ground-truth chunk."""
    return [
        {
            "id": f"D{i + 1}",
            "file": c.path,
            "line_start": c.line_start,
            "line_end": c.line_end,
            "defect_type": c.defect_type,
            "severity": "high" if i == 0 else "medium",
            "description": c.annotation,
        }
        for i, c in enumerate(task.chunks)
    ]


def _curator_ground_truth(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth_agent.json``: files, a symbol and annotated chunks."""
    return {
        "files": paths,
        "symbols": [
            {"file": p, "symbol": task.symbol, "repo": task.repos[0].upstream} for p in paths[:1]
        ],
        "chunks": [
            {
                "file": c.path,
                "line_start": c.line_start,
                "line_end": c.line_end,
                "annotation": c.annotation,
            }
            for c in task.chunks
        ],
        "expected_edit_files": [],
    }


def _curator_meta(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth_meta.json``: what the curator agent says about its ground truth."""
    return {
        "has_ground_truth": True,
        "has_chunk_ground_truth": True,
        "ground_truth_source": "curator_agent",
        "ground_truth_confidence": "medium",
        "task_name": task.name,
        "curator_agent_version": "2.0",
        "model": "claude-opus-4-6",
        "backend": "hybrid",
        "timestamp": "2026-03-04T00:11:31Z",
        "files_count": len(paths),
        "edit_files_count": 0,
        "chunks_count": len(task.chunks),
        "symbols_count": 1,
        "cost_usd": 0.36359250000000004,
        "elapsed_sec": 49.1,
        "exploration_notes": f"Traced {task.symbol} through its definition and callers.",
    }


def _solve_sh(task: TaskSpec) -> str:
    """``solution/solve.sh``: a script that applies the gold patch."""
    return (
        "#!/bin/bash\n"
        f"# Gold patch for {task.name}\n"
        "set -euo pipefail\n"
        "cd /workspace\n"
        "git apply --whitespace=nowarn <<'PATCH'\n"
        f"{_diff(task)}"
        "PATCH\n"
        'echo "gold patch applied"\n'
    )
