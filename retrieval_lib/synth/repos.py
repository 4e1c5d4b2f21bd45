"""Synthetic repositories and their file contents.

The generator needs code bases to search: :data:`REPOS` holds a few small, realistic
file trees (Django, Kafka, Istio, llama.cpp, and the three repositories of a cross-repo
Envoy task). File contents are made up on demand, deterministically, from per-language
line pools, so reading a file twice gives the same text and nothing is stored on disk.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

__all__ = [
    "ORG_REPOS",
    "REPOS",
    "RepoProfile",
    "file_language",
    "file_lines",
    "stable_hash",
    "symbol_line",
    "total_lines",
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


#: Language of a file by its extension; other extensions take the repository's language.
_EXTENSIONS = {"py": "python", "java": "java", "scala": "java", "go": "go", "c": "cpp"}
_EXTENSIONS |= {"cpp": "cpp", "h": "cpp", "proto": "protobuf"}


def file_language(profile: RepoProfile, path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if path.endswith(_TEXT_SUFFIXES) or "." not in name:
        return "text"
    language = _EXTENSIONS.get(name.rsplit(".", 1)[-1], profile.language)
    return language if language in _LINE_POOLS else "text"


def stable_hash(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).encode("utf-8"))


def total_lines(profile: RepoProfile, path: str) -> int:
    """Number of lines of a synthetic file (deterministic, 60 to 2,500).

    Examples
    --------
    >>> total_lines(REPOS["django"], "AUTHORS") == total_lines(REPOS["django"], "AUTHORS")
    True
    """
    return 60 + stable_hash(profile.short, path) % 2440


def symbol_line(profile: RepoProfile, path: str, symbol: str) -> int:
    """The line (1-based) at which ``symbol`` is mentioned in ``path``."""
    return 12 + stable_hash(profile.short, path, symbol) % (total_lines(profile, path) - 24)


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
    language = file_language(profile, path)
    pool = _LINE_POOLS[language]
    size = len(pool)
    last = total_lines(profile, path)
    end = min(end, last)
    offset = stable_hash(profile.short, path) % size
    lines = [pool[(offset + i) % size] for i in range(start - 1, end)]
    if symbol is not None:
        where = symbol_line(profile, path, symbol)
        if start <= where <= end:
            lines[where - start] = _SYMBOL_LINES[language].format(symbol=symbol)
    return lines
