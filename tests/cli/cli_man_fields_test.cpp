// config_fields_roff(): the manual page's list of config fields (roff), which the build
// writes into fp8wb.1 (fp8wb_man_fields, packaging/man/generate_man_page.cmake), has every
// row of the field table, under its group, with what it takes.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "config_field_text.h"
#include "fp8wb/core/config/run_config_fields.h"

namespace {

// The roff escapes the generator writes, undone: "\-" as "-", "\(dq" as '"', "\e" as '\'.
std::string plain(std::string s) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\\-", "-"}, {"\\(dq", "\""}, {"\\e", "\\"}}) {
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
      s.replace(at, from.size(), to);
  }
  return s;
}

TEST(CliManFields, EveryFieldOfTheTableUnderItsGroupWithWhatItTakes) {
  const std::string roff = fp8wb::cli::config_fields_roff();
  // Each field's tag line (".B key" or ".BR key \" what it takes\""), with the group whose
  // .SS heading it is under, and the line after it (its help).
  std::map<std::string, std::string> group_of, tag_of, help_of;
  std::istringstream in(roff);
  std::string line, group, pending;
  while (std::getline(in, line)) {
    if (line.rfind(".SS ", 0) == 0) {
      group = plain(line.substr(5, line.size() - 6));  // .SS "NAME"
    } else if (line.rfind(".B ", 0) == 0 || line.rfind(".BR ", 0) == 0) {
      const std::string rest = plain(line.substr(line.find(' ') + 1));
      pending = rest.substr(0, rest.find(' '));
      EXPECT_EQ(group_of.count(pending), 0u) << pending << " is listed twice";
      group_of[pending] = group;
      tag_of[pending] = rest;
    } else if (!pending.empty() && line.rfind(".", 0) != 0) {
      help_of[pending] = plain(line);
      pending.clear();
    }
  }
  for (const fp8wb::RunConfigField& f : fp8wb::run_config_fields()) {
    const std::string key(f.key);
    ASSERT_EQ(group_of.count(key), 1u) << "the manual page's list misses the field " << key;
    std::string group_name;
    for (const auto& g : fp8wb::kFieldGroups)
      if (g.value == f.group) group_name = g.name;
    EXPECT_EQ(group_of[key], group_name) << key;
    EXPECT_NE(help_of[key].find(std::string(f.help)), std::string::npos) << key;
    if (!f.names.empty()) {
      for (std::string_view n : f.names)
        EXPECT_NE(tag_of[key].find(std::string(n)), std::string::npos) << key << ": " << n;
    } else if (f.type == fp8wb::FieldType::Boolean) {
      EXPECT_NE(tag_of[key].find("(true|false)"), std::string::npos) << key;
    } else if (const std::string b = fp8wb::field_bounds_text(f); !b.empty()) {
      EXPECT_NE(tag_of[key].find(b), std::string::npos) << key << ": " << b;
    }
  }
  EXPECT_EQ(group_of.size(), fp8wb::run_config_fields().size());
  // The models a field is for, as the page says them.
  EXPECT_NE(help_of["kv_heads"].find("(the llama)"), std::string::npos);
  EXPECT_NE(help_of["d_model"].find("(the GPT and the llama)"), std::string::npos);
  EXPECT_NE(help_of["width"].find("(the MLP)"), std::string::npos);
  EXPECT_EQ(help_of["lr"].find("(the"), std::string::npos);
}

}  // namespace
