"""PromptQueue on its own: priority order, running bookkeeping, history paging and cap, flags."""

from comfy_bridge.server.prompt_queue import ExecutionStatus, PromptQueue, QueueItem


def item(number, pid):
    return QueueItem(number, pid, {"1": {}}, {}, ["1"], {"secret": 1})


def test_lowest_number_first_and_ties_by_arrival():
    q = PromptQueue()
    for number, pid in ((2, "b"), (1, "a"), (2, "c"), (-5, "front")):
        q.put(item(number, pid))
    assert [q.get(0)[0].prompt_id for _ in range(4)] == ["front", "a", "b", "c"]
    assert q.get(0.01) is None


def test_running_items_and_task_done_history_hide_secrets():
    changes = []
    q = PromptQueue(on_change=lambda: changes.append(q.get_tasks_remaining()))
    q.put((0, "p", {"1": {}}, {"client_id": "c"}, ["1"]))  # a plain tuple, as node packs enqueue
    got, task = q.get(0)
    running, pending = q.get_current_queue()
    assert running == [[0, "p", {"1": {}}, {"client_id": "c"}, ["1"]]] and pending == []
    q.task_done(task, {"outputs": {"1": {"images": []}}, "meta": {}}, ExecutionStatus("success", True, []))
    assert q.get_current_queue() == ([], [])
    entry = q.get_history("p")["p"]
    assert entry["prompt"] == [0, "p", {"1": {}}, {"client_id": "c"}, ["1"]]
    assert entry["status"] == {"status_str": "success", "completed": True, "messages": []}
    assert changes == [1, 1, 0]


def test_history_cap_drops_oldest():
    q = PromptQueue(max_history=3)
    for i in range(5):
        q.put(item(i, f"p{i}"))
        _, task = q.get(0)
        q.task_done(task, {}, None)
    assert list(q.get_history()) == ["p2", "p3", "p4"]


def test_delete_and_wipe_and_flags():
    q = PromptQueue()
    for i in range(3):
        q.put(item(i, f"p{i}"))
    assert q.delete_queue_item(lambda it: it.prompt_id == "p1") is True
    assert q.delete_queue_item(lambda it: it.prompt_id == "p1") is False
    assert sorted(i[1] for i in q.get_current_queue()[1]) == ["p0", "p2"]
    q.wipe_queue()
    assert q.get_tasks_remaining() == 0
    q.set_flag("free_memory", True)
    assert q.get_flags() == {"free_memory": True} and q.get_flags() == {}
