-- wrk script of the rest race (bench/lib/rest_load.py runs it): one of the
-- four endpoints of brisk-foods / the FastAPI peer, chosen by environment
-- variables (read at the top level, so every wrk thread's Lua state sees
-- them; wrk 4.1 hands init() its arguments on the main state only):
--   REST_ENDPOINT   categories | foods-list | template-full | bulk-insert
--   REST_BODY       bulk-insert: the JSON file POSTed as is (100 foods)
--   REST_TEMPLATES  template-full: ids 1..N are asked in turn (default 100)
--   REST_CATEGORIES foods-list: category_id 1..N in turn (default 20)
-- categories and bulk-insert are static requests (wrk formats them once);
-- foods-list and template-full build each request in request().
-- done() prints one line, "REST-RESULT key=value ...", with the counts and
-- the latency percentiles in microseconds (wrk's --latency prints 50, 75,
-- 90 and 99 only; the race wants 95 too).

local endpoint = os.getenv("REST_ENDPOINT") or "categories"
local ntemplates = tonumber(os.getenv("REST_TEMPLATES") or "100")
local ncategories = tonumber(os.getenv("REST_CATEGORIES") or "20")

wrk.headers["Accept"] = "application/json"

if endpoint == "categories" then
   wrk.method = "GET"
   wrk.path = "/api/categories"
elseif endpoint == "bulk-insert" then
   local path = os.getenv("REST_BODY")
   local f = assert(io.open(path, "rb"), "REST_BODY: cannot open " .. tostring(path))
   wrk.body = f:read("*a")
   f:close()
   wrk.method = "POST"
   wrk.path = "/api/foods/bulk"
   wrk.headers["Content-Type"] = "application/json"
elseif endpoint == "foods-list" then
   local n = 0
   function request()
      n = n + 1
      return wrk.format("GET", "/api/foods?category_id=" .. (n % ncategories + 1) .. "&limit=20")
   end
elseif endpoint == "template-full" then
   local n = 0
   function request()
      n = n + 1
      return wrk.format("GET", "/api/templates/" .. (n % ntemplates + 1) .. "/full")
   end
else
   error("REST_ENDPOINT: unknown endpoint " .. endpoint)
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "REST-RESULT requests=%d duration_us=%d bytes=%d p50_us=%d p90_us=%d p95_us=%d " ..
      "p99_us=%d mean_us=%.1f max_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
      summary.requests, summary.duration, summary.bytes,
      latency:percentile(50), latency:percentile(90), latency:percentile(95),
      latency:percentile(99), latency.mean, latency.max,
      e.connect, e.read, e.write, e.status, e.timeout))
end
