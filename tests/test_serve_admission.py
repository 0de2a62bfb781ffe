"""`live serve`'s admission (live/serve/limits.py `Admission`), without a model or an engine.

What a hosted server accepts must hold from any number of HTTP threads at once: never more
requests or tokens in flight than its limits, and every slot back once its request closes.
"""

from __future__ import annotations

import threading

import pytest

from live.serve.limits import Admission, LimitError, ServeLimits


def test_a_request_that_can_never_fit_is_refused_with_400_and_says_what_to_change():
    admission = Admission(ServeLimits(max_num_requests=2, max_model_len=64), vocab=100)
    cases = [
        (([], 4, 0), "prompt is empty", "prompt"),
        (([1], 0, 0), "max_tokens must be >= 1", "max_tokens"),
        (([1], 4, 5), "min_tokens must be between 0 and max_tokens (4)", "min_tokens"),
        (([1] * 60, 10, 0), "maximum context length is 64 tokens", "max_tokens"),
        (([1, 100], 4, 0), "token id 100 is outside the vocabulary (0..99)", "prompt"),
        (([-1], 4, 0), "token id -1 is outside", "prompt"),
    ]
    for args, message, param in cases:
        with pytest.raises(LimitError) as err:
            admission.check(*args)
        assert err.value.status == 400 and message in err.value.message, args
        assert err.value.param == param
    admission.check([1] * 54, 10)  # exactly the context: accepted
    assert admission.active == 0 and admission.tokens == 0  # checking counts nothing


def test_a_full_server_answers_429_and_takes_requests_again_once_they_close():
    admission = Admission(
        ServeLimits(max_num_requests=2, max_model_len=64, max_tokens_in_flight=80), vocab=100
    )
    admission.take(40)
    with pytest.raises(LimitError) as err:  # 40 + 50 > 80 tokens in flight
        admission.take(50)
    assert err.value.status == 429 and err.value.kind == "RateLimitError"
    assert "40 prompt + output tokens are in flight" in err.value.message
    admission.take(20)
    with pytest.raises(LimitError, match="already has 2 requests"):  # at most 2 at once
        admission.take(1)
    assert (admission.active, admission.tokens) == (2, 60)  # refusals counted nothing
    admission.give_back(40)
    admission.take(50)  # fits now
    assert (admission.active, admission.tokens) == (2, 70)


def test_many_threads_at_once_never_pass_the_limits_and_leave_nothing_counted():
    """12 clients, 50 rounds: in each, all try at once and those let in hold their slot until
    every one has tried, so at most 5 get in (fewer when their tokens pass 200)."""
    limits = ServeLimits(max_num_requests=5, max_model_len=64, max_tokens_in_flight=200)
    admission = Admission(limits, vocab=100)
    clients, rounds = 12, 50
    tried, done = threading.Barrier(clients), threading.Barrier(clients)
    seen, lock = [], threading.Lock()
    admitted = [[] for _ in range(rounds)]

    def client(budget: int) -> None:
        for r in range(rounds):
            try:
                admission.take(budget)
                got = True
            except LimitError as err:
                assert err.status == 429
                got = False
            with lock:
                seen.append((admission.active, admission.tokens))
                if got:
                    admitted[r].append(budget)
            tried.wait()  # nobody gives back before everybody has tried
            if got:
                admission.give_back(budget)
            done.wait()

    threads = [threading.Thread(target=client, args=(10 + 7 * i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(not t.is_alive() for t in threads)
    assert all(1 <= len(a) <= limits.max_num_requests for a in admitted)
    assert all(sum(a) <= limits.tokens_in_flight for a in admitted)
    assert max(a for a, _ in seen) <= limits.max_num_requests
    assert max(t for _, t in seen) <= limits.tokens_in_flight
    assert admission.active == 0 and admission.tokens == 0
