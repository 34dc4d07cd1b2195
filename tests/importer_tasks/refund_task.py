"""A tiny Inspect AI task whose logs the importer tests read (no network: mockllm).

The support agent of the example registry, played by a scripted solver so that every
epoch's tool path and verdict is known in advance (`PLAN`), while Inspect itself records
the log: tool calls as `ToolEvent`s inside agent spans, four scorers returning C/I with
metadata (one of them calling the model, whose usage must not count), model usage with
cache reads and writes, one epoch that errors once and is retried, and one that errors on
every attempt.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    GenerateConfig,
    Model,
    ModelOutput,
    ModelUsage,
    execute_tools,
    get_model,
)
from inspect_ai.scorer import Score, Scorer, Target, accuracy, pass_at, pass_k, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, ToolCall, tool
from inspect_ai.util import span

EPOCHS = 5
RETRIES = 2  # retry_on_error: each sample gets at most 1 + RETRIES attempts

# Usage the mock model reports for every call (the agent's and the judge's alike).
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read": 30, "cache_write": 5}
AGENT_MODEL_CALLS = 1  # the solver calls the model once per attempt; the judge once more

# sample id -> epoch -> what happens. Each epoch: tool calls of the target agent
# ("support") and of a delegate ("researcher"), the four scorers' values, and failures.
PLAN: dict[str, dict[int, dict[str, Any]]] = {
    # support-refund-in-order: look up, refund 42.00 once. Epoch 3 uses the bulk refund tool
    # (forbidden) and the refund check fails; epoch 5 refunds the wrong amount.
    "A-1": {
        e: {
            "calls": [("support", "lookup_order", {"orderId": "A-1"})]
            + (
                [("support", "refund_all", {"customerId": "C-77"})]
                if e == 3
                else [
                    (
                        "support",
                        "refund",
                        {"orderId": "A-1", "amountMinor": 4200 if e != 5 else 1999},
                    )
                ]
            ),
            "scores": {
                "refund_check": "I" if e in (3, 5) else "C",
                "ticket_check": "C",
                "reply_judge": "C",
                "effect_guard": "C",
            },
        }
        for e in range(1, EPOCHS + 1)
    },
    # support-refund-policy-explanation: look up B-7, a delegate searches the knowledge base.
    # Epoch 2 hits a rate limit once and passes on its retry.
    "A-2": {
        e: {
            "calls": [
                ("support", "lookup_order", {"orderId": "B-7"}),
                ("researcher", "kb_search", {"query": "refund window"}),
            ],
            "scores": {
                "refund_check": "C",
                "ticket_check": "C",
                "reply_judge": "C",
                "effect_guard": "C",
            },
            "fail_attempts": 1 if e == 2 else 0,
            "error": "rate limit exceeded (429)",
        }
        for e in range(1, EPOCHS + 1)
    },
    # support-reply-tone: epoch 4 crashes on every attempt; epoch 1's judge answers a value
    # the map does not list (P) and epoch 5's gives no score at all (NaN, Score.unscored).
    "A-3": {
        e: {
            "calls": [("support", "lookup_order", {"orderId": "C-12"})],
            "scores": {
                "refund_check": "C",
                "ticket_check": "C",
                "reply_judge": {1: "P", 5: None}.get(e, "C"),
                "effect_guard": "C",
            },
            "fail_attempts": 1 + RETRIES if e == 4 else 0,
            "error": "tool sandbox crashed: segfault in helpdesk client",
        }
        for e in range(1, EPOCHS + 1)
    },
}

ATTEMPTS: Counter[tuple[str, int]] = Counter()


def mock_model() -> Model:
    def output(*_: Any) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm/model", content="refund approved")
        out.usage = ModelUsage(
            input_tokens=USAGE["input_tokens"],
            output_tokens=USAGE["output_tokens"],
            total_tokens=USAGE["input_tokens"] + USAGE["output_tokens"],
            input_tokens_cache_read=USAGE["cache_read"],
            input_tokens_cache_write=USAGE["cache_write"],
        )
        return out

    return get_model("mockllm/model", custom_outputs=output, config=GenerateConfig())


@tool
def lookup_order() -> Tool:
    async def execute(orderId: str) -> str:
        """Look an order up in the CRM.

        Args:
            orderId: The order id.
        """
        return f"order {orderId}"

    return execute


@tool
def refund() -> Tool:
    async def execute(orderId: str, amountMinor: int) -> str:
        """Refund an order.

        Args:
            orderId: The order id.
            amountMinor: Amount in minor units.
        """
        return f"refunded {amountMinor} for {orderId}"

    return execute


@tool
def refund_all() -> Tool:
    async def execute(customerId: str) -> str:
        """Refund every order of a customer.

        Args:
            customerId: The customer id.
        """
        return f"refunded everything of {customerId}"

    return execute


@tool
def kb_search() -> Tool:
    async def execute(query: str) -> str:
        """Search the knowledge base.

        Args:
            query: What to look for.
        """
        return "kb-refunds-30d"

    return execute


TOOLS = [lookup_order(), refund(), refund_all(), kb_search()]


async def _call(state: TaskState, n: int, function: str, arguments: dict[str, Any]) -> None:
    call = ToolCall(id=f"call-{n}", function=function, arguments=arguments)
    state.messages.append(ChatMessageAssistant(content="", tool_calls=[call]))
    result = await execute_tools(state.messages, TOOLS)
    state.messages.extend(result.messages)


@solver
def scripted_support_agent(call_model: bool = True) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        plan = PLAN[str(state.sample_id)][state.epoch]
        key = (str(state.sample_id), state.epoch)
        ATTEMPTS[key] += 1
        if ATTEMPTS[key] <= plan.get("fail_attempts", 0):
            raise RuntimeError(plan["error"])
        async with span("support", type="agent"):
            if call_model:
                state = await generate(state)
            for n, (agent, function, arguments) in enumerate(plan["calls"]):
                if agent == "support":
                    await _call(state, n, function, arguments)
                else:
                    async with span(agent, type="agent"):
                        await _call(state, n, function, arguments)
        state.store.set("evalops:external_effects", _effects(plan))
        return state

    return solve


def _effects(plan: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"effect_key": f"refund:{args['orderId']}", "status": "committed"}
        for _, function, args in plan["calls"]
        if function == "refund"
    ]


def _plan_scorer(name: str, *, judge: bool = False) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        plan = PLAN[str(state.sample_id)][state.epoch]
        if judge:
            # A model-graded scorer: its model usage is the grader's, not the agent's.
            await get_model().generate("judge the reply")
        value = plan["scores"][name]
        if value is None:
            return Score.unscored(reason="judge output unparseable")
        return Score(
            value=value,
            explanation=f"{name} for {state.sample_id}/{state.epoch}",
            metadata={"scorer": name, "epoch": state.epoch},
        )

    return score


@scorer(metrics=[accuracy()])
def refund_check() -> Scorer:
    return _plan_scorer("refund_check")


@scorer(metrics=[accuracy()])
def ticket_check() -> Scorer:
    return _plan_scorer("ticket_check")


@scorer(metrics=[accuracy()])
def reply_judge() -> Scorer:
    return _plan_scorer("reply_judge", judge=True)


@scorer(metrics=[accuracy()])
def effect_guard() -> Scorer:
    return _plan_scorer("effect_guard")


@solver
def crash_once_on_a2() -> Solver:
    """The first run of A-2 crashes (the harness's own error, not the agent's): the eval
    fails, and `eval_retry` runs A-2 again. Whether it ran is kept in the environment,
    which outlives the task module Inspect reloads for the retry."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == "A-2" and not os.environ.get(CRASHED):
            os.environ[CRASHED] = "1"
            raise RuntimeError("worker lost")
        return state

    return solve


CRASHED = "EVALOPS_TEST_A2_CRASHED"


@scorer(metrics=[accuracy()], name="reply_judge")
def reply_judge_offline() -> Scorer:
    return _plan_scorer("reply_judge")


@task
def refund_agent_once() -> Task:
    """One epoch of the refund task, A-2 crashing on the first run (the eval-retry pair).

    `eval_retry` rebuilds the model from the log, without the mock's scripted outputs, so
    nothing here calls a model."""
    return Task(
        dataset=[Sample(id=s, input=f"ticket for sample {s}", target="C") for s in PLAN],
        solver=[crash_once_on_a2(), scripted_support_agent(call_model=False)],
        scorer=[refund_check(), ticket_check(), reply_judge_offline(), effect_guard()],
        version=2,
    )


@task
def refund_agent() -> Task:
    return Task(
        dataset=[Sample(id=s, input=f"ticket for sample {s}", target="C") for s in PLAN],
        solver=scripted_support_agent(),
        scorer=[refund_check(), ticket_check(), reply_judge(), effect_guard()],
        epochs=Epochs(EPOCHS, ["mean", pass_at(3), pass_k(3)]),
        version=2,
    )
