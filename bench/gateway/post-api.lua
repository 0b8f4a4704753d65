-- wrk script: one small call of the API in BODY (a JSON document), non-streaming. Set
-- AUTH for a bearer token. Used by run.sh for BENCH_API=responses|messages.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Client-ID"] = "bench"
local auth = os.getenv("AUTH")
if auth and auth ~= "" then wrk.headers["Authorization"] = "Bearer " .. auth end
wrk.body = os.getenv("BODY")
