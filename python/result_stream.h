// ResultStream: a search or watch of the C++ Client (client/lib/propeller.h) run on a thread of
// its own, its hits or events handed to a consumer through a bounded queue. It is what lets the
// Python package (python/README.md) turn the library's callbacks into iterators: the consumer
// pulls at its own pace, holding the GIL only while it converts what it pulled, and the worker
// never touches Python objects (so a stream never waits for the GIL, and joining it while
// holding the GIL cannot deadlock).
//
// Memory: at most kCapacity items wait here. When the consumer is slower, the worker blocks in
// the library's callback: a search's index nodes keep answering into the library's own queue
// (a search holds no node open for a slow caller: Client::Search), a watch's nodes queue up to
// ClientWatchOptions::max_queued changes and then end the watch with ResourceExhausted ("fell
// behind"), as `propeller watch` does.
//
// Thread-safety: Next, WaitReady and Cancel may be called from any thread; the worker is
// started by the factory and joined by Join or the destructor.
#ifndef PROPELLER_PYTHON_RESULT_STREAM_H_
#define PROPELLER_PYTHON_RESULT_STREAM_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/propeller.h"
#include "common/mutex.h"
#include "common/status.h"

namespace propeller::python {

// One search hit (kind 0) or watch event ('+', '-', '~').
struct StreamItem {
  char kind = 0;
  std::string path;
  FileRecord record;
};

class ResultStream {
 public:
  // Items waiting for the consumer at most. 4,096 records of ~200 bytes: ~1 MB, and enough
  // that the consumer takes a full batch per wake-up while the worker fills the next.
  static constexpr size_t kCapacity = 4096;

  // Starts a search of `query` on `client` (kept alive by the stream).
  static std::unique_ptr<ResultStream> StartSearch(std::shared_ptr<Client> client,
                                                   std::string query,
                                                   ClientSearchOptions options);
  // Starts a watch; WaitReady tells when every index node registered it.
  static std::unique_ptr<ResultStream> StartWatch(std::shared_ptr<Client> client,
                                                  std::string query,
                                                  ClientWatchOptions options);
  // Cancels and joins.
  ~ResultStream();
  ResultStream(const ResultStream&) = delete;
  ResultStream& operator=(const ResultStream&) = delete;

  // What Next found.
  enum class Outcome {
    kItems,    // *out holds 1..max items
    kWaiting,  // nothing arrived within the wait: ask again (after checking for signals)
    kEnded,    // the stream is over: *status says how (OK, the library's error, or Cancel's)
  };
  // Moves up to `max` waiting items to *out (cleared first), waiting at most `wait` for the
  // first. Once the items are used up after the end, kEnded with the final status.
  Outcome Next(size_t max, std::chrono::milliseconds wait, std::vector<StreamItem>* out,
               Status* status);
  // Watch: waits at most `wait` for the watch to be registered on every index node. kItems
  // when it is (or was), kEnded when the watch ended first (*status: why), else kWaiting.
  Outcome WaitReady(std::chrono::milliseconds wait, Status* status);
  // Ends the stream: the worker stops at its next hit, event or idle tick (a watch ticks
  // about once a second while nothing changes). Items not consumed are dropped, and Next then
  // reports kEnded with `why` (unless the stream had ended already).
  void Cancel(const Status& why);
  // Waits for the worker to return. REQUIRES: no other thread in Join at the same time.
  void Join();

 private:
  ResultStream() = default;
  // Worker side. Push waits while the queue is full; false once cancelled.
  bool Push(StreamItem&& item);
  void MarkReady();
  bool Cancelled();
  void Finish(const Status& status);

  Mutex mu_;
  CondVar cv_;  // signalled on every change of the fields below
  std::deque<StreamItem> items_ PROPELLER_GUARDED_BY(mu_);
  bool ready_ PROPELLER_GUARDED_BY(mu_) = false;
  bool finished_ PROPELLER_GUARDED_BY(mu_) = false;  // the worker returned
  bool cancelled_ PROPELLER_GUARDED_BY(mu_) = false;
  Status status_ PROPELLER_GUARDED_BY(mu_);  // the end's; set once
  std::thread worker_;
};

}  // namespace propeller::python

#endif  // PROPELLER_PYTHON_RESULT_STREAM_H_
