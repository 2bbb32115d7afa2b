-- Strings: interning, concatenation and buffers, string.format, patterns and gsub, with
-- results checked against known answers (CRC-32 values computed independently with
-- Python's zlib.crc32).

local crctab = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if c & 1 == 1 then c = 0xEDB88320 ~ (c >> 1) else c = c >> 1 end
  end
  crctab[i] = c
end
local function crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do c = crctab[(c ~ s:byte(i)) & 0xFF] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end
assert(crc32("123456789") == 0xCBF43926)
assert(crc32("") == 0)

-- Concatenation: piecewise (quadratic copying) and through table.concat agree.
local parts = {}
local acc = ""
for i = 1, 3000 do
  local piece = tostring(i * i) .. ";"
  parts[i] = piece
  acc = acc .. piece
end
local joined = table.concat(parts)
assert(acc == joined)
assert(#joined == 22543)
assert(crc32(joined) == 0xBE860005)

-- Interning: equal short strings built different ways are the same value (and table key).
local keyset = {}
for i = 1, 10000 do keyset["key" .. i] = i end
for i = 1, 10000 do
  local k = string.format("key%d", i)
  assert(keyset[k] == i)
  assert(("k" .. "ey" .. i) == k)
end
-- Long strings (beyond the interning limit) compare and hash by contents too.
local long1 = string.rep("abcdefghij", 1000)
local long2 = {}
for i = 1, 1000 do long2[i] = "abcdefghij" end
long2 = table.concat(long2)
assert(long1 == long2 and #long1 == 10000)
local lk = {[long1] = "found"}
assert(lk[long2] == "found")
assert(crc32(long1) == 0x22EFA768)

-- string.rep with separator, sub, byte/char, upper/lower, reverse.
assert(string.rep("ab", 3, ",") == "ab,ab,ab")
assert(string.rep("x", 0) == "" and string.rep("x", -1) == "")
local alpha = "The Quick Brown Fox Jumps Over The Lazy Dog"
assert(alpha:upper() == "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG")
assert(alpha:lower() == "the quick brown fox jumps over the lazy dog")
assert(alpha:reverse() == "goD yzaL ehT revO spmuJ xoF nworB kciuQ ehT")
assert(alpha:sub(5, 9) == "Quick" and alpha:sub(-3) == "Dog" and alpha:sub(100) == "")
assert(alpha:sub(0) == alpha and alpha:sub(-100, 3) == "The")
local bytes = {alpha:byte(1, -1)}
assert(#bytes == #alpha and string.char(table.unpack(bytes)) == alpha)
local all = {}
for i = 0, 255 do all[#all + 1] = string.char(i) end
all = table.concat(all)
assert(#all == 256 and crc32(all) == 0x29058C73)

-- string.format.
assert(string.format("%5d|%-5d|%05d", 42, 42, 42) == "   42|42   |00042")
assert(string.format("%x %X %o", 255, 255, 8) == "ff FF 10")
assert(string.format("%.3f %e %g", math.pi, 12345.678, 0.0001) ==
       "3.142 1.234568e+04 0.0001")
assert(string.format("%10.4s|", "abcdefg") == "      abcd|")
assert(string.format("%q", 'a\n"b"\0c') == '"a\\\n\\"b\\"\\0c"')
assert(string.format("%q", 1 / 0) == "1e9999" and string.format("%q", math.mininteger) ==
       "0x8000000000000000")
assert(string.format("%a", 1.0) == "0x1p+0")
assert(string.format("%c%c%c", 76, 117, 97) == "Lua")
assert(string.format("%s %s %s", nil, true, 12) == "nil true 12")
assert(string.format("%i", -7) == "-7" and string.format("%%") == "%")
local fmtparts = {}
for i = 1, 2000 do fmtparts[i] = string.format("%d:%.2f:%s:%x", i, i / 7, "s" .. i, i * 31) end
assert(crc32(table.concat(fmtparts, "\n")) == 0xDA594466)

-- Numbers to strings and back.
assert(tostring(10 // 3) == "3" and tostring(10 / 2) == "5.0" and tostring(-0.0) == "-0.0")
assert(tostring(2^63) == "9.2233720368548e+18" and math.maxinteger == 9223372036854775807)
assert(tonumber("0x10") == 16 and tonumber("  12  ") == 12 and tonumber("1e2") == 100.0)
assert(tonumber("z", 36) == 35 and tonumber("777", 8) == 511 and tonumber("8", 8) == nil)
assert(tonumber("1e") == nil and tonumber("") == nil and tonumber("0x") == nil)
assert("10" + 5 == 15 and "3" * "4" == 12 and 10 .. 20 == "1020")

-- Patterns: find, match, gmatch, gsub with strings, tables and functions.
assert(("hello world"):find("o w") == 5)
assert(("hello world"):find("o", 6) == 8)
assert(("a.b.c"):find(".", 1, true) == 2)
assert(("key = value"):match("^(%w+)%s*=%s*(%w+)$") == "key")
local k, v = ("key = value"):match("^(%w+)%s*=%s*(%w+)$")
assert(k == "key" and v == "value")
assert(("  trim me  "):match("^%s*(.-)%s*$") == "trim me")
assert(("[[nested]]"):match("%[(%b[])%]") == "[nested]")
assert(("THE (quick) fox"):find("%f[%a]%a+%f[%A]") == 1)
assert(("abc"):match("()b()") == 2)
local ws = {}
for w in ("one two  three   four"):gmatch("%a+") do ws[#ws + 1] = w end
assert(#ws == 4 and ws[3] == "three")
local kv = {}
for key, val in ("a=1, b=22, c=333"):gmatch("(%w+)=(%w+)") do kv[key] = tonumber(val) end
assert(kv.a == 1 and kv.b == 22 and kv.c == 333)
local r, n = ("hello world"):gsub("o", "0")
assert(r == "hell0 w0rld" and n == 2)
assert(("hello world"):gsub("(%w+) (%w+)", "%2 %1") == "world hello")
assert(("abc"):gsub("", "-") == "-a-b-c-")
assert(("$name is $age"):gsub("%$(%w+)", {name = "Ann", age = 33}) == "Ann is 33")
assert(("1 2 3"):gsub("%d", function(d) return d * 2 end) == "2 4 6")
assert(("abc"):gsub("%w", "%0%0") == "aabbcc")
assert(("x y z"):gsub("%s", "", 1) == "xy z")
-- A large gsub: every number in a long text replaced by its square.
local text = {}
for i = 1, 20000 do text[i] = "n" .. i end
text = table.concat(text, " ")
local squared, cnt = text:gsub("%d+", function(d) local x = tonumber(d); return tostring(x * x) end)
assert(cnt == 20000)
local total = 0
for d in squared:gmatch("%d+") do total = total + tonumber(d) end
assert(total == 20000 * 20001 * 40001 // 6)
-- Escaping special characters.
local special = "a+b*c?d(e)f[g]h^i$j%k.l-m"
local escaped = special:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
assert(("xx" .. special .. "yy"):find(escaped) == 3)
-- Errors from malformed patterns are catchable.
assert(not pcall(string.find, "a", "[a"))
assert(not pcall(string.find, "alo", "(.")); assert(not pcall(string.gsub, "alo", ".", "%2"))

-- utf8 library.
local u = utf8.char(72, 228, 8364, 128512)
assert(#u == 1 + 2 + 3 + 4 and utf8.len(u) == 4)
local cps = {}
for _, c in utf8.codes(u) do cps[#cps + 1] = c end
assert(cps[1] == 72 and cps[2] == 228 and cps[3] == 8364 and cps[4] == 128512)
assert(utf8.offset(u, 3) == 4 and utf8.codepoint(u, 4) == 8364)
assert(utf8.len("\xff") == nil)

-- A string builder under churn: many short-lived strings, then one checksum.
local buf = {}
for i = 1, 50000 do
  local s = ("%d-%s"):format(i, ("x"):rep(i % 17))
  buf[#buf + 1] = s:sub(1, 1 + i % 5)
end
assert(crc32(table.concat(buf)) == 0x4D899CA5)
