// `strata chat` driven through a pseudo-terminal, as a person would use it.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  bool started() const { return pid_ > 0; }

  // Reads until the screen so far contains `count` occurrences of text, or the deadline passes.
  bool wait_for(const std::string& text, size_t count, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (occurrences(text) < count) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd fd{master_, POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) return false;
      char buffer[4096];
      const ssize_t n = read(master_, buffer, sizeof buffer);
      if (n <= 0) return occurrences(text) >= count;
      screen_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  void type(const std::string& text) {
    ASSERT_EQ(write(master_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  int wait_exit(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      wait_for("\x01never", 1, std::chrono::seconds(1));  // keep draining the terminal
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -2;
  }

  const std::string& screen() const { return screen_; }

 private:
  size_t occurrences(const std::string& text) const {
    size_t count = 0;
    for (size_t at = screen_.find(text); at != std::string::npos; at = screen_.find(text, at + 1)) ++count;
    return count;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string screen_;
};

TEST(ChatInATerminal, AnswersEachLineAndQuitsOnExit) {
  const auto model = std::filesystem::temp_directory_path() / "strata-chat-pty.gguf";
  const auto synth = test::run_command(test::shell_quote(test::strata_executable().string()) +
                                       " synth --arch qwen3moe --preset tiny --type q8_0 --output " +
                                       test::shell_quote(model.string()));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;

  PtyProcess chat({test::strata_executable().string(), "chat", "--model", model.string(), "-n", "6", "--temp", "0",
                   "--log-level", "warn"});
  ASSERT_TRUE(chat.started());
  ASSERT_TRUE(chat.wait_for("> ", 1, std::chrono::seconds(60))) << chat.screen();
  chat.type("Hello there\r");
  ASSERT_TRUE(chat.wait_for("> ", 2, std::chrono::seconds(60))) << chat.screen();
  chat.type("And again\r");
  ASSERT_TRUE(chat.wait_for("> ", 3, std::chrono::seconds(60))) << chat.screen();
  chat.type("/exit\r");
  EXPECT_EQ(chat.wait_exit(std::chrono::seconds(30)), 0) << chat.screen();
  EXPECT_NE(chat.screen().find("Hello there"), std::string::npos) << "the terminal echoes what was typed";
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace strata
