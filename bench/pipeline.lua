-- wrk script: HTTP/1.1 pipelining. Each connection writes DEPTH requests in
-- one write and wrk counts every response, so Requests/sec is responses/sec.
-- Usage: wrk -s bench/pipeline.lua URL -- [DEPTH]   (DEPTH defaults to 16)

local req

init = function(args)
   local depth = tonumber(args[1]) or 16
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)   -- GET wrk.path with wrk.headers (Host)
   end
   req = table.concat(r)
end

request = function()
   return req
end
