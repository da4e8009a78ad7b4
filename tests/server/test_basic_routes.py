async def test_server_starts_and_answers_queue_counter(client):
    r = await client.get("/prompt")
    assert r.status == 200
    assert await r.json() == {"exec_info": {"queue_remaining": 0}}
    r = await client.get("/api/prompt")
    assert await r.json() == {"exec_info": {"queue_remaining": 0}}
