// The Jinja engine (core/template) against Jinja2 as Hugging Face's apply_chat_template configures it:
// every reference conversation of every reference template renders byte for byte, and each feature
// behaves as Jinja2 documents it (expected strings were checked against Jinja2 3.1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gguf/gguf_file.hpp"
#include "core/template/chat_template.hpp"
#include "core/template/globals.hpp"
#include "core/template/template.hpp"
#include "core/util/error.hpp"
#include "support/model_copy.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

using jinja::Template;
using jinja::Value;
using testing::HasSubstr;

jinja::RenderOptions pinned_clock() { return {jinja::parse_time_pin("2026-11-30 12:00")}; }

std::string render(const std::string& source,
                   const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, value] : variables.items()) values.emplace_back(name, Value::from_json(value));
  return Template(source).render(values, pinned_clock());
}

// The message of the strata::Error that rendering (or compiling) throws; empty when it succeeds.
std::string render_error(const std::string& source) {
  try {
    render(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::filesystem::path> reference_template_files() {
  std::vector<std::filesystem::path> files;
  const auto folder = test::reference_dir() / "templates";
  if (!std::filesystem::is_directory(folder)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().string().ends_with(".cases.json")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(TemplateReference, EveryCaseRendersExactlyAsJinja2) {
  const auto files = reference_template_files();
  ASSERT_FALSE(files.empty()) << "no reference templates under " << test::reference_dir() / "templates";
  for (const auto& file : files) {
    const auto reference = nlohmann::ordered_json::parse(std::ifstream(file));
    const Template chat_template(reference.at("template").get<std::string>());
    size_t passed = 0;
    const auto& cases = reference.at("cases");
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto request = jinja::chat_request_from_json(cases[i]);
      const std::string rendered = jinja::render_chat(chat_template, request, pinned_clock());
      EXPECT_EQ(rendered, cases[i].at("expected").get<std::string>()) << file.filename() << " case " << i;
      passed += rendered == cases[i].at("expected").get<std::string>();
    }
    std::cout << "[ reference ] " << file.filename().string() << ": " << passed << "/" << cases.size() << " cases\n";
  }
}

TEST(TemplateCommand, PrintsTheRenderingWithoutAddingANewline) {
  const auto files = reference_template_files();
  ASSERT_FALSE(files.empty()) << "no reference templates under " << test::reference_dir() / "templates";
  const auto folder = std::filesystem::temp_directory_path() / "strata-template-command";
  std::filesystem::create_directories(folder);
  const auto reference = nlohmann::ordered_json::parse(std::ifstream(files.front()));
  std::ofstream(folder / "chat.jinja") << reference["template"].get<std::string>();
  auto conversation = reference["cases"][0];
  const std::string expected = conversation["expected"];
  conversation.erase("expected");
  std::ofstream(folder / "case.json") << conversation.dump();
  const auto result =
      test::run_command(test::shell_quote(test::strata_executable().string()) + " template --template " +
                        test::shell_quote((folder / "chat.jinja").string()) + " --input " +
                        test::shell_quote((folder / "case.json").string()) + " --now '2026-11-30 12:00'");
  std::filesystem::remove_all(folder);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, expected);
}

TEST(TemplateWhitespace, TrimBlocksAndLstripBlocksApplyToBlockAndCommentTagsOnly) {
  EXPECT_EQ(render("  {% if true %}\n    line\n  {% endif %}\n  {{ 'var' }}\n  {# comment #}\nafter\n"),
            "    line\n  var\nafter");
}

TEST(TemplateWhitespace, MinusStripsAndPlusKeeps) {
  EXPECT_EQ(render("a   {%- if true -%}   b   {%- endif -%}   c"), "abc");
  EXPECT_EQ(render("a  {%+ if true %}b{% endif +%}\nx\n{{- '-' -}}\n  z"), "a  b\nx-z");
  EXPECT_EQ(render("  {#- c -#}  x"), "x");
}

TEST(TemplateWhitespace, RawBlocksAreNotInterpreted) {
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}\n  {%- raw -%}  x  {%- endraw %}\n"),
            "{{ not rendered }}x");
}

TEST(TemplateLoops, LoopVariables) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ "
                   "loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a','b') }}|{% "
                   "endfor %}"),
            "1032TrueFalse32a|2121FalseFalse313b|3210FalseTrue32a|");
  // One loop object, updated at each iteration, as Jinja2's LoopContext (so iterations cost no data).
  EXPECT_EQ(render("{% set ns = namespace() %}{% for x in [1, 2] %}{% set ns.l = loop %}{% endfor %}{{ ns.l.index }}{{ "
                   "ns.l.last }}"),
            "2True");
}

TEST(TemplateLoops, ElseFilterBreakContinueAndDicts) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}/{{ loop.length }},{% endfor %}"),
            "1/5,3/5,5/5,7/5,9/5,");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif "
                   "%}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{{ "
                   "d.values()|list }}",
                   {{"d", {{"b", 2}, {"a", 1}}}}),
            "b=2;a=1;ba[2, 1]");
}

TEST(TemplateScopes, LoopAssignmentsStayInsideButNamespacesCarryOut) {
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in range(2) %}{% set x = x + 10 %}{{ x }}{% endfor %}{{ x }}"
             "{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}"),
      "111114");
  EXPECT_EQ(render("{% set x = 0 %}{% if true %}{% set x = 5 %}{% endif %}{{ x }}"), "5");
  EXPECT_NE(render_error("{% set x = 1 %}{% set x.a = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(TemplateAssignments, BlockSetTupleUnpackingAndWith) {
  EXPECT_EQ(
      render("{% set x %}  block {{ 1 + 1 }}  {% endset %}[{{ x }}]{% set y | trim %}  tr  {% endset %}[{{ y }}]"),
      "[  block 2  ][tr]");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = (3, 4) %}{{ c + d }}"), "127");
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
}

TEST(TemplateMacros, DefaultsKeywordsCallerAndFilterBlocks) {
  EXPECT_EQ(render("{% macro m(a, b=2, c='x') %}[{{ a }} {{ b }} {{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, "
                   "c='y') }}"),
            "[1 2 x][1 3 x][1 2 y]");
  EXPECT_EQ(
      render(
          "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"),
      "<b>inner</b>");
  EXPECT_EQ(render("{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}"
                   "{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(render("{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3) }}"), "1(2, 3){}");
  EXPECT_EQ(render("{% filter upper %}hello {{ 'you' }}{% endfilter %}"), "HELLO YOU");
  // Macros see their defining scope while it lasts, and calls within it work at any depth...
  EXPECT_EQ(
      render(
          "{% set p = '>' %}{% macro m(x) %}{{ p }}{{ x }}{% endmacro %}{% for i in [1, 2] %}{{ m(i) }}{% endfor %}"),
      ">1>2");
  // ...but a macro does not keep a finished scope alive (that reference cycle leaked every render).
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}x{% endmacro %}"
                           "{% set ns.f = m %}{% endfor %}{{ ns.f() }}"),
              HasSubstr("after the scope defining it ended"));
}

TEST(TemplateExpressions, SlicingArithmeticAndPythonPrinting) {
  EXPECT_EQ(
      render("{{ [1,2,3,4,5][::2] }} {{ 'hello'[::-1] }} {{ 'hello'[1:4] }} {{ [1,2,3][-2:] }} {{ [1,2,3][5:] }}"),
      "[1, 3, 5] olleh ell [2, 3] []");
  EXPECT_EQ(render("{{ 1/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 1e20 }} {{ 0.1+0.2 }} {{ 10/5 }} "
                   "{{ [1,'a',none,true,1.5] }} {{ {'a':(1,)} }}"),
            "0.5 3 -4 2 1024 1e+20 0.30000000000000004 2.0 [1, 'a', None, True, 1.5] {'a': (1,)}");
  EXPECT_EQ(render("{{ 2 ** 3 ** 2 }} {{ -3|abs }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 < 2 "
                   "< 3 }} {{ 1 == 1.0 }}"),
            "64 3 a1NoneTrue abab [1, 2] True True");
  EXPECT_EQ(
      render(
          "{{ 'a' if n > 5 else 'b' }}{{ 'x' if false }}|{{ true and 'x' }} {{ false or 'y' }} {{ 'z' not in ['a'] }}",
          {{"n", 7}}),
      "a|x y True");
  EXPECT_EQ(render("{{ '%s=%d' % ('a', 1) }} {{ '%.2f' % 1.5 }}"), "a=1 1.50");
  EXPECT_EQ(render("{{ \"tab\\there\" }} {{ 'uni\\u00e9\\x41' }} {{ \"a\" \"b\" }} {{ 'q\\'s' }}"),
            "tab\there uniéA ab q's");
}

TEST(TemplateExpressions, UndefinedIsEmptyAndFalsyUntilUsedWhereJinja2Fails) {
  const nlohmann::ordered_json vars = {{"d", {{"a", 1}}}};
  EXPECT_EQ(
      render(
          "[{{ missing }}][{{ d.z }}][{{ d.z is defined }}][{{ missing|length }}][{% for x in missing %}x{% endfor %}]",
          vars),
      "[][][False][0][]");
  EXPECT_EQ(render("{{ none.x is defined }}"), "False");
  EXPECT_NE(render_error("{{ missing.x }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ missing + 1 }}").find("is undefined"), std::string::npos);
}

TEST(TemplateMethods, StringAndDictMethods) {
  EXPECT_EQ(
      render("{{ s.upper() }} {{ s.split() }} {{ s.split('o', 1) }} {{ s.rsplit('o', 1) }} {{ 'xxhixx'.strip('x') }} "
             "{{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }} {{ s.replace('l', 'L') }} {{ s.find('W') }} {{ "
             "s.count('l') }} "
             "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ '{} and {}'.format(1, 'b') }} {{ "
             "'-'.join(['a', 'b']) }}",
             {{"s", "Hello World"}}),
      "HELLO WORLD ['Hello', 'World'] ['Hell', ' World'] ['Hello W', 'rld'] hi True True HeLLo WorLd 6 3 Hello World "
      "Hello 1 and b a-b");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d['a'] }}",
                   {{"d", {{"a", 1}}}}),
            "1 None 5 ['a'] 1");
}

TEST(TemplateFilters, BuiltinFilters) {
  EXPECT_EQ(
      render("{{ ['b','A','c']|sort }} {{ [1,2,1,3]|unique|list }} {{ 'hello world'|title }} {{ "
             "\"a\\nb\\n\\nc\"|indent(2) }} "
             "{{ 2.5|round }} {{ '4.7'|int }} {{ '<a>'|escape }} {{ {'b':1,'a':2}|dictsort }} {{ "
             "[1,2,3,4,5]|batch(2)|list }}"),
      "['A', 'b', 'c'] [1, 2, 3] Hello World a\n  b\n\n  c 2.0 4 &lt;a&gt; [('a', 2), ('b', 1)] [[1, 2], [3, 4], [5]]");
  EXPECT_EQ(
      render("{{ '  x '|trim }}|{{ [3,1,2]|first }}{{ [3,1,2]|last }}|{{ [3,1,2]|join(',') }}|{{ none|default('d') }}|"
             "{{ missing|d('d') }}|{{ ''|default('d', true) }}|{{ 'abc'|length }}|{{ [1,2,3]|reverse|list }}|{{ 'hi "
             "you'|wordcount }}"),
      "x|32|3,1,2|None|d|d|3|[3, 2, 1]|2");
  const nlohmann::ordered_json messages = {{"m", {{{"role", "system"}}, {{"role", "user"}}, {{"role", "user"}}}}};
  EXPECT_EQ(render("{{ m|map(attribute='role')|join(',') }} {{ ['a','b']|map('upper')|list }} "
                   "{{ m|selectattr('role', 'equalto', 'user')|list|length }} {{ m|rejectattr('role', 'eq', "
                   "'user')|map(attribute='role')|list }} "
                   "{{ [1,2,3,4]|select('even')|list }} {{ [0,1,2]|select|list }} {{ [1,2,3]|reject('odd')|list }}",
                   messages),
            "system,user,user ['A', 'B'] 2 ['system'] [2, 4] [1, 2] [2]");
}

TEST(TemplateFilters, TojsonIsHuggingFacesJsonDumps) {
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1.0, none, 'é\"\\n']}|tojson }}"),
            "{\"b\": 1, \"a\": [1.0, null, \"é\\\"\\n\"]}");
  EXPECT_EQ(render("{{ {'a': [1, {}]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    {}\n  ]\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ 'é'|tojson(ensure_ascii=true) }}"),
            "{\"a\": 2, \"b\": 1} \"\\u00e9\"");
  EXPECT_NE(render_error("{{ missing|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(TemplateTests, IsTests) {
  EXPECT_EQ(
      render("{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ none is none }}{{ 's' is string }}{{ true is "
             "number }}"
             "{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [1] is iterable }}{{ 's' is sequence }}{{ "
             "true is boolean }}"
             "{{ false is false }}{{ missing is undefined }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 "
             "}}{{ 1 is ge 1 }}"
             "{{ 1 is le 0 }}{{ 'a' is in 'abc' }}{{ 'ABC' is upper }}{{ 'upper' is filter }}{{ x is not defined }}"),
      "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrue");
}

TEST(TemplateGlobals, StrftimeNowRangeDictJoinerAndRaiseException) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y %H:%M %A') }}"), "30 Nov 2026 12:00 Monday");
  EXPECT_EQ(render("{{ range(2, 10, 3)|list }} {{ dict(a=1) }} {% set j = joiner('+') %}{% for x in range(3) %}{{ j() "
                   "}}{{ x }}{% endfor %}"),
            "[2, 5, 8] {'a': 1} 0+1+2");
  EXPECT_EQ(render_error("\n\n{{ raise_exception('boom') }}"), "template line 3: boom");
}

TEST(TemplateErrors, NameTheLine) {
  EXPECT_EQ(render_error("line one\n{{ x | foo }}").rfind("template line 2: unknown filter 'foo'", 0), 0u);
  EXPECT_EQ(render_error("{% if true %}\n{% foo %}").rfind("template line 2: unknown tag 'foo'", 0), 0u);
  EXPECT_EQ(render_error("{% for x in y %}\nno end").rfind("template line 2: unexpected end of template", 0), 0u);
  EXPECT_EQ(render_error("{{ 'abc }}").rfind("template line 1: unterminated string", 0), 0u);
  EXPECT_EQ(render_error("\n{{ 'a' + 1 }}"), "template line 2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{% for x in 5 %}{% endfor %}"), "template line 1: 'int' object is not iterable");
  EXPECT_EQ(render_error("{% macro m() %}\n{{ raise_exception('inside') }}{% endmacro %}\n\n{{ m() }}"),
            "template line 2: inside");
  // An argument of the wrong type is an error of the render, not of the process (found by fuzzing).
  EXPECT_EQ(render_error("\n{{ 'a' | center(2.5) }}"),
            "template line 2: filter 'center': expected an integer, got 'float'");
  EXPECT_EQ(render_error("{{ 0b }}"), "template line 1: invalid integer literal (column 4)");
  EXPECT_EQ(render_error("{{ 99999999999999999999 }}"),
            "template line 1: integer literal out of the 64-bit range (column 4)");
  EXPECT_EQ(render("{{ 1e999 }}"), "inf");
  // Integers are 64-bit: overflow is an error, not undefined behaviour; powers by squaring stay quick.
  EXPECT_EQ(render_error("{{ 9223372036854775807 + 1 }}"),
            "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render_error("{{ -(-9223372036854775807 - 1) }}"),
            "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render_error("{{ 3 ** 41 }}"), "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render("{{ 1 ** 1000000000000000000 }} {{ (-1) ** 999999999999 }} {{ 3 ** 39 }} {{ -7 % -1 }}"),
            "1 -1 4052555153018976267 0");
  EXPECT_EQ(render_error("{{ (1e300 * 1e300) | int }}"),
            "template line 1: filter 'int': cannot convert float infinity to integer");
  EXPECT_EQ(render_error("{{ 1e19 | int }}"),
            "template line 1: filter 'int': integer overflow (integers are 64-bit here)");
  // Results have a size limit, so a template cannot make the process allocate without bound.
  EXPECT_THAT(render_error("{{ 'ab' * 100000000 }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ range(9223372036854775807) | length }}"), HasSubstr("past the limit"));
  EXPECT_THAT(
      render_error("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
      HasSubstr("past the limit"));
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5) | list }}"),
            "[9223372036854775800, 9223372036854775805]");
  // Nesting is bounded, in the parser and in the evaluator (macro recursion included): no stack overflow.
  EXPECT_THAT(render_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
              HasSubstr("nested deeper than 200 levels"));
  EXPECT_THAT(render_error("{{ 1" +
                           [] {
                             std::string s;
                             for (int i = 0; i < 300; ++i) s += " + 1";
                             return s;
                           }() +
                           " }}"),
              HasSubstr("nested deeper than 200 levels"));
  EXPECT_THAT(render_error("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"),
              HasSubstr("nested deeper than 200 levels"));
  EXPECT_EQ(render("{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) | length }}"),
            "32");
  // And so is the work of one render (10 million expressions by default).
  jinja::RenderOptions small_budget = pinned_clock();
  small_budget.max_evaluations = 1000;
  const Template loops("{% for i in range(50) %}{% for j in range(50) %}{% set x = j %}{% endfor %}{% endfor %}");
  EXPECT_THAT(
      [&] {
        try {
          loops.render({}, small_budget);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("evaluated more than 1000 expressions"));
  EXPECT_EQ(loops.render({}, pinned_clock()), "");
  // A truncated UTF-8 sequence is one character for len() and for indexing alike.
  EXPECT_EQ(render("{{ s | length }}[{{ s[1] }}]", {{"s", std::string("\xe0"
                                                                      "ab")}}),
            "1[]");
}

// The filters check their arguments as Jinja2 does, or give its result: a model's template may pass anything.
TEST(TemplateFilters, TruncateChecksItsArgumentsAsJinja2Does) {
  EXPECT_EQ(render_error("{{ \"x\"|truncate(-5) }}"),
            "template line 1: filter 'truncate': expected length >= 3, got -5");
  EXPECT_EQ(render_error("\n{{ 'hello world foo'|truncate(9, leeway=-1) }}"),
            "template line 2: filter 'truncate': expected leeway >= 0, got -1");
  EXPECT_EQ(render("{{ 'hello world foo'|truncate(9) }}|{{ 'hello world foo'|truncate(9, true) }}|{{ 'héllo wörld "
                   "foo'|truncate(10, false, '..', 0) }}|"
                   "{{ 'short'|truncate(9223372036854775807, leeway=9223372036854775807) }}"),
            "hello...|hello ...|héllo..|short");
}

TEST(TemplateFilters, EveryFilterChecksItsArgumentsOrGivesJinja2sResult) {
  EXPECT_EQ(
      render("{{ 'x'|center(-5) }}|{{ 'x'|center(4) }}|{{ 'a\nb'|indent(-3, true) }}|{{ [1, 2, 3]|batch(2, 0)|list }}"),
      "x| x  |a\nb|[[1, 2], [3, 0]]");
  EXPECT_THAT(render_error("{{ 'x'|center(99999999999) }}"), HasSubstr("filter 'center': a result of 99999999999"));
  EXPECT_THAT(render_error("{{ 'a\nb'|indent(9223372036854775807) }}"), HasSubstr("filter 'indent': a result of"));
  EXPECT_THAT(render_error("{{ ('a\n' * 1000)|indent(100000) }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ [1]|batch(9223372036854775807, 0)|list }}"), HasSubstr("filter 'batch': a result of"));
  // A fill of many items is work charged before it is copied (found by fuzzing: seconds of copies first).
  EXPECT_THAT(render_error("{{ [2]|batch(9000000, missing)|list }}"), HasSubstr("filter 'batch': the template built"));
  EXPECT_THAT(render_error("{{ {'a': 1}|tojson(indent=9223372036854775807) }}"),
              HasSubstr("filter 'tojson': a result of"));
  EXPECT_THAT(render_error("{{ (['x' * 1000000] * 20)|join(',') }}"), HasSubstr("filter 'join': a result of"));
  // round: Python's, for any precision (half to even on the exact binary value; ints stay ints).
  EXPECT_EQ(
      render(
          "{{ 2.675|round(2) }} {{ 1234.5|round(-2) }} {{ 1250|round(-2) }} {{ 1350|round(-2) }} {{ -1250|round(-2) }} "
          "{{ 0.5|round }} {{ 2.5|round(400) }} {{ 2.5|round(-400) }} {{ 1.25|round(1) }} {{ 15|round(-1, 'ceil') }} "
          "{{ 1.21|round(1, 'floor') }} {{ 5|round(-9223372036854775807 - 1) }} {{ 2.5|round(9223372036854775807) }}"),
      "2.67 1200.0 1200 1400 -1200 0.0 2.5 0.0 1.2 20.0 1.2 0 2.5");
  EXPECT_EQ(render_error("{{ 1.5|round(400, 'ceil') }}"),
            "template line 1: filter 'round': int too large to convert to float");
  EXPECT_EQ(render_error("{{ 9000000000000000000|round(-19) }}"),
            "template line 1: filter 'round': integer overflow (integers are 64-bit here)");
  // printf-style formatting: widths and precisions are checked, strings are never cut at a NUL.
  EXPECT_EQ(render("{{ '%.3s|%-5s|%05d|%5.1f|%x|%s' % ('abcdef', 'x', 42, 3.14159, 255, 'a\\x00b') }}"),
            std::string("abc|x    |00042|  3.1|ff|a\0b", 28));
  EXPECT_THAT(render_error("{{ '%-99999999999d' % 1 }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ '%.99999999999999999999f' % 1 }}"), HasSubstr("too big"));
  EXPECT_EQ(render("{{ 'abc'|int }} {{ '1e3'|int }} {{ ' 12 '|int }} {{ 'inf'|int }} {{ '12'|int(base=99) }} {{ "
                   "'0x1f'|int(base=0) }} "
                   "{{ '1e999'|float }} {{ ' 2.5 '|float }} {{ 'x'|float(1) }}"),
            "0 1000 12 0 12 31 inf 2.5 1");
  EXPECT_EQ(render_error("{{ '99999999999999999999'|int }}"),
            "template line 1: filter 'int': integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render("{{ [[1]]|map(attribute='99999999999999999999')|list }}"), "[Undefined]");
}

TEST(TemplateExpressions, OperatorsAndMethodsCheckTheirOperands) {
  EXPECT_EQ(render_error("{{ 5 is divisibleby 0 }}"), "template line 1: test 'divisibleby': integer modulo by zero");
  EXPECT_EQ(render_error("{{ 5 is divisibleby }}"),
            "template line 1: test 'divisibleby': missing required argument 'num'");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }}"), "True");
  EXPECT_EQ(render_error("{{ 0 ** -1 }}"), "template line 1: 0.0 cannot be raised to a negative power");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5, 6][5::9223372036854775807] }}{{ 'abc'[::-9223372036854775807] }}{{ 'héllo'[1:3] "
                   "}}{{ 'héllo'[-4] }}"),
            "[6]célé");
  EXPECT_THAT(render_error("{{ '{99999999999999999999}'.format(1) }}"),
              HasSubstr("Replacement index 99999999999999999999 out of range"));
  EXPECT_THAT(render_error("{{ 'xyz'.replace('', 'y' * 10000000) }}"), HasSubstr("method 'replace': a result of"));
  EXPECT_THAT(render_error("{{ '\\U00110000' }}"), HasSubstr("past U+10FFFF"));
  // Searches take linear time whatever the needle.
  EXPECT_EQ(
      render("{{ ('a' * 4000000).count('a' * 2000 + 'b') }} {{ ('a' * 4000000).rfind('b' + 'a' * 2000) }} "
             "{{ ('a' * 4000000 + 'b' + 'a' * 3000).find('b' + 'a' * 2000) }} {{ ('ab' * 3)|replace('ab' * 2, '-') }} "
             "{{ 'xxabxxabxx'.split('ab' * 1) }} {{ 'a--b--c'.rsplit('--', 1) }} {{ '<<x>>'.strip('<>') }}"),
      "0 -1 4000000 -ab ['xx', 'xx', 'xx'] ['a--b', 'c'] x");
  // Long needles too (the standard library's Boyer-Moore builds its table in quadratic time: found by fuzzing).
  EXPECT_EQ(render("{{ ('ab' * 1000000 ~ 'c')|replace('ab' * 500000 ~ 'c', '-')|length }} {{ 'x'|replace('xy' * "
                   "1000000, '-') }} "
                   "{{ ('ab' * 1000000 ~ 'c').rfind('c' ~ 'ab' * 10) }} {{ ('c' ~ 'ab' * 1000000).rsplit('c' ~ 'ab' * "
                   "500000)|length }}"),
            "1000001 x -1 2");
}

// Nesting is counted wherever it is built, so nothing recurses past 200 levels: not the parser, not the
// evaluator, and not the destructors of the tree or of data built at run time.
std::string repeated(const std::string& piece, int times) {
  std::string text;
  for (int i = 0; i < times; ++i) text += piece;
  return text;
}

TEST(TemplateLimits, LongChainsAreRefusedByTheParserWithoutRecursing) {
  for (const std::string& source :
       {"{{ x" + repeated("|trim", 100000) + " }}", "{{ 1" + repeated(" + 1", 100000) + " }}",
        "{{ 'a'" + repeated(" ~ 'a'", 100000) + " }}", "{{ x" + repeated(".a", 100000) + " }}",
        "{{ x" + repeated("[0]", 100000) + " }}", "{{ x" + repeated("()", 100000) + " }}",
        "{{ x" + repeated(" is defined", 100000) + " }}", "{{ " + repeated("not ", 100000) + "x }}",
        "{{ " + repeated("-", 100000) + "1 }}", "{{ 1" + repeated(" if 1 else 1", 100000) + " }}",
        "{{ 1" + repeated(" < 1", 100000) + " }}", repeated("{% if 1 %}", 100000)}) {
    EXPECT_THAT(render_error(source), HasSubstr("nested deeper than 200 levels")) << source.substr(0, 40);
  }
  EXPECT_EQ(render("{{ 1" + repeated(" + 1", 150) + " }}"), "151");
}

TEST(TemplateLimits, DeepDataBuiltInALoopIsFreedWithoutRecursingAndRefusedWherePrinted) {
  auto build = [](int depth) {
    return "{% set ns = namespace(x={}) %}{% for i in range(" + std::to_string(depth) +
           ") %}{% set ns.x = {'a': ns.x} %}{% endfor %}";
  };
  EXPECT_EQ(render(build(200000) + "{{ ns.x|length }}"), "1");
  EXPECT_EQ(render_error(build(1000) + "{{ ns.x }}"), "template line 1: nested deeper than 200 levels");
  EXPECT_EQ(render_error(build(1000) + "{{ ns.x|tojson }}"),
            "template line 1: filter 'tojson': nested deeper than 200 levels");
  EXPECT_EQ(render_error(build(1000) + "{{ ns.x == {'a': ns.x} }}"), "template line 1: nested deeper than 200 levels");
  EXPECT_EQ(render_error(build(1000) + "{{ [ns.x] < [ns.x] }}"), "template line 1: nested deeper than 200 levels");
  // Lists nest through bound methods too; map applying map recurses once per level of the data.
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x.count, ns.x] %}{% "
                   "endfor %}{{ ns.x|length }}"),
            "2");
  EXPECT_THAT(render_error("{% set ns = namespace(x=[1]) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}"
                           "{{ ns.x|map('map', 'map'" +
                           repeated(", 'map'", 300) + ")|list }}"),
              HasSubstr("nested deeper than 200 levels"));
  // A caller() kept past its call block keeps nothing alive (no cycles, no chains of frames).
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% macro keep() %}{% set ns.c = caller %}{% endmacro %}"
                           "{% for i in [1] %}{% call keep() %}x{% endcall %}{% endfor %}{{ ns.c() }}"),
              HasSubstr("after the call block that defines it ended"));
}

TEST(TemplateLimits, OutputMemoryAndWorkAreBounded) {
  EXPECT_THAT(render_error("{{ range(10**12) }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ 'ab' * 9223372036854775807 }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ 'x' * 10000000 }}{{ 'x' * 10000000 }}"), HasSubstr("past the limit"));
  // Copies share their data, so a list of one big string many times is small...
  EXPECT_EQ(render("{% set s = 'x' * 16000000 %}{{ ([s] * 1000000)|length }}"), "1000000");
  // ...and printing it is bounded like any result.
  EXPECT_THAT(render_error("{% set s = 'x' * 1000000 %}{{ [s] * 100 }}"), HasSubstr("past the limit"));
  // Work: data built, copied or compared, in total, whatever each result's size.
  EXPECT_THAT(render_error("{% for i in range(1000) %}{% set x = range(1000000)|list %}{% endfor %}"),
              HasSubstr("bytes of data (the work limit of one render)"));
  EXPECT_THAT(render_error("{{ range(200000)|unique|list|length }}"), HasSubstr("the work limit of one render"));
  jinja::RenderOptions small = pinned_clock();
  small.max_work = 1 << 20;
  const Template copies("{% set s = 'x' * 100000 %}{% for i in range(100) %}{% set t = s ~ i %}{% endfor %}");
  EXPECT_THAT(
      [&] {
        try {
          copies.render({}, small);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("more than 1048576 bytes of data"));
  EXPECT_EQ(copies.render({}, pinned_clock()), "");
}

// Resident memory of this process, in bytes.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Namespaces are the only values a template can change, so the only way to a reference cycle: a render frees
// the cycles it made (else a server would leak at every request with such a template; found by fuzzing).
TEST(TemplateLimits, ReferenceCyclesEndWithTheRender) {
  const Template cycles(
      "{% set ns = namespace(big='x' * 4000000) %}{% set ns.self = ns %}"
      "{% for i in [1] %}{% set ns.loop = loop %}{{ loop.changed(loop) }}{% endfor %}");
  const int64_t before = resident_bytes();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(cycles.render({}, pinned_clock()), "True");
  // Under AddressSanitizer freed memory stays resident (quarantine); LeakSanitizer then fails this test at exit.
  if (!test::kAddressSanitizer) {
    EXPECT_LT(resident_bytes() - before, int64_t{100} << 20) << "100 renders of 4 MB each were not freed";
  }
}

// Files named on the command line: a directory or a missing file is an error naming it.
TEST(TemplateCommand, RefusesDirectoriesMissingFilesAndInputNestedTooDeep) {
  const auto folder = std::filesystem::temp_directory_path() / "strata-template-files";
  std::filesystem::create_directories(folder / "a-directory");
  std::ofstream(folder / "chat.jinja") << "{{ messages|length }}";
  std::ofstream(folder / "case.json") << R"({"messages": [{"role": "user", "content": "hi"}]})";
  std::ofstream(folder / "deep.json") << "{\"messages\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::ofstream(folder / "big.json") << R"({"messages": [18446744073709551615]})";
  std::ofstream(folder / "truncate.jinja") << "\n{{ 'x'|truncate(-5) }}";
  auto run = [&](const std::string& template_path, const std::string& input_path) {
    return test::run_command(test::shell_quote(test::strata_executable().string()) + " template --template " +
                             test::shell_quote((folder / template_path).string()) + " --input " +
                             test::shell_quote((folder / input_path).string()));
  };
  const auto fine = run("chat.jinja", "case.json");
  const auto template_directory = run("a-directory", "case.json");
  const auto input_directory = run("chat.jinja", "a-directory");
  const auto missing = run("chat.jinja", "missing.json");
  const auto deep = run("chat.jinja", "deep.json");
  const auto big = run("chat.jinja", "big.json");
  const auto failing = run("truncate.jinja", "case.json");
  std::filesystem::remove_all(folder);
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_EQ(fine.out, "1");
  const std::string prefix = "strata: error: " + folder.string() + "/";
  EXPECT_EQ(template_directory.exit_code, 1);
  EXPECT_EQ(template_directory.err, prefix + "a-directory: cannot read the template (--template): it is a folder\n");
  EXPECT_EQ(input_directory.exit_code, 1);
  EXPECT_EQ(input_directory.err, prefix + "a-directory: cannot read the input (--input): it is a folder\n");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, prefix + "missing.json: cannot read the input (--input): No such file or directory\n");
  EXPECT_EQ(deep.exit_code, 1);
  EXPECT_EQ(deep.err, prefix + "deep.json: JSON nested deeper than 200 levels\n");
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_EQ(big.err, prefix + "big.json: integer 18446744073709551615 is past the 64-bit range\n");
  EXPECT_EQ(failing.exit_code, 1);
  EXPECT_EQ(failing.err, prefix + "truncate.jinja: template line 2: filter 'truncate': expected length >= 3, got -5\n");
}

// A copy of the model at `from` whose tokenizer.chat_template is `chat_template`.
void write_with_chat_template(const std::filesystem::path& from, const std::filesystem::path& to,
                              const std::string& chat_template) {
  test::ModelChanges changes;
  changes.metadata["tokenizer.chat_template"] = gguf::Value{chat_template};
  test::write_model_copy(gguf::Model(from), to, changes);
}

// The template inside a model file is input too: `generate --chat` and `chat` end with an error naming the
// model and the template's line, whatever the template does.
TEST(ChatTemplateOfAModel, AFailingTemplateIsAnErrorNamingTheModel) {
  const auto folder = std::filesystem::temp_directory_path() / "strata-chat-template-model";
  std::filesystem::create_directories(folder);
  const std::string strata = test::shell_quote(test::strata_executable().string());
  const auto synth = test::run_command(strata + " synth --arch qwen3moe --preset tiny --type q8_0 --output " +
                                       test::shell_quote((folder / "tiny.gguf").string()));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{{ messages[0]['content']|truncate(-5) }}", "template line 1: filter 'truncate': expected length >= 3, got -5"},
      {"{{ messages[0].content" + repeated("|trim", 100000) + " }}",
       "template line 1: expression nested deeper than 200 levels"},
      {"{% set ns = namespace(x=[]) %}{% for i in range(200000) %}{% set ns.x = [ns.x] %}{% endfor %}\n{{ ns.x }}",
       "template line 2: nested deeper than 200 levels"},
  };
  for (const auto& [chat_template, error] : cases) {
    const auto model = folder / "crafted.gguf";
    write_with_chat_template(folder / "tiny.gguf", model, chat_template);
    const std::string flags = " --log-level error --model " + test::shell_quote(model.string()) + " -n 2";
    const std::string expected = "strata: error: " + model.string() + ": tokenizer.chat_template: " + error;
    const auto generate = test::run_command(strata + " generate" + flags + " -p hello --chat");
    EXPECT_EQ(generate.exit_code, 1) << generate.err;
    EXPECT_THAT(generate.err, testing::StartsWith(expected));
    EXPECT_EQ(std::count(generate.err.begin(), generate.err.end(), '\n'), 1) << "one line";
    const auto chat = test::run_command("printf 'hello\\n' | " + strata + " chat" + flags);
    EXPECT_EQ(chat.exit_code, 1) << chat.err;
    EXPECT_THAT(chat.err, testing::StartsWith(expected));
  }
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace strata
