-- wrk script for bench/submit.py. With WRK_BODY set: POST it as JSON to the URL (a job);
-- without: GET the URL (the /healthz ceiling). Either way, one summary line at the end.
local body = os.getenv("WRK_BODY")
if body then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'WRK_SUMMARY {"requests":%d,"duration_us":%d,"non_2xx_3xx":%d,"socket_errors":%d,'
      .. '"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
