// The worker threads behind parallel_for: started by the first call that needs them and kept. Handing
// out a job to spinning workers, or waking sleeping ones (a condition variable notify), costs a small
// fraction of starting and joining a thread per call, which is a sizeable part of a large GEMV
// (figures: benchmarks/README.md).
//
// Protocol. One job at a time: a caller takes `submit_` (try_lock: a second concurrent caller, or a
// call from inside a task, gets false and runs its work itself), publishes the job under `mutex_` and
// bumps `generation_`. Workers notice the new generation (spinning for `spin_time` after their last
// job, then sleeping on `wake_`), join under `mutex_` while the job is open, and claim task indices
// from `next_index_` alongside the caller. The caller returns once every index has run and every
// worker has left (`active_` == 0, checked under `mutex_`), then closes the job, so no worker can still
// be reading it when the next one is published. Workers with an id >= count - 1 sit a job out.
//
// Lifetime. The pool is never destroyed: sleeping workers end with the process. In the child of a
// fork() the workers do not exist, so the child starts a fresh pool (pthread_atfork) and abandons the
// parent's.
#pragma once

#include "../config.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

LOWBIT_BEGIN_NAMESPACE
namespace detail {

class ThreadPool {
public:
    /// How long an idle worker keeps polling for the next job before it sleeps: long enough to catch
    /// back-to-back calls (a model's layers), short enough not to hold a core when lowbit is idle.
    static constexpr std::chrono::microseconds spin_time{50};

    /// The process's pool.
    static ThreadPool& instance() {
        static const bool registered = [] {
#if defined(__unix__) || defined(__APPLE__)
            pthread_atfork(nullptr, nullptr, [] { current().store(new ThreadPool, std::memory_order_release); });
#endif
            return true;
        }();
        (void)registered;
        return *current().load(std::memory_order_acquire);
    }

    /// Runs task(i) for every i in [0, count) on the calling thread and up to count - 1 workers, each
    /// index exactly once, and returns when all have finished; the first exception a task throws is
    /// rethrown here (after every index has run). Returns false, having run nothing, when the pool is
    /// busy with another job or the caller is itself running a task: the caller then does the work.
    template <class Task>
    bool try_run(std::size_t count, Task& task) {
        if (inside_task() || count == 0) return false;
        std::unique_lock<std::mutex> submit(submit_, std::try_to_lock);
        if (!submit.owns_lock()) return false;
        // Workers are started on demand and never more than max_threads() - 1 (parallel_for asks for at
        // most num_threads() <= max_threads() ranges). When the system refuses a thread, the job runs
        // on the workers that exist: indices are claimed, not assigned, so none is lost.
        try {
            for (; started_ + 1 < count; ++started_)
                std::thread(&ThreadPool::worker_loop, this, started_, generation_.load(std::memory_order_acquire))
                    .detach();
        } catch (const std::system_error&) {
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = Job{&call<Task>, &task, count};
            job_open_ = true;
            error_ = nullptr;
            next_index_.store(0, std::memory_order_relaxed);
            remaining_.store(count, std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();

        inside_task() = true;
        claim_and_run(job_);
        inside_task() = false;

        // Wait for the workers' indices and for every worker to leave the job.
        const auto deadline = std::chrono::steady_clock::now() + spin_time;
        for (unsigned spins = 0; !finished(); ++spins) {
            pause();
            if ((spins & 255u) == 255u && std::chrono::steady_clock::now() > deadline) break;
        }
        std::exception_ptr error;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            done_.wait(lock, [&] { return finished(); });
            job_open_ = false;
            error = error_;
            error_ = nullptr;
        }
        if (error) std::rethrow_exception(error);
        return true;
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

private:
    struct Job {
        void (*run)(void* task, std::size_t index) = nullptr;
        void* task = nullptr;
        std::size_t count = 0;
    };

    ThreadPool() = default;

    static std::atomic<ThreadPool*>& current() {
        static std::atomic<ThreadPool*> pool{new ThreadPool};
        return pool;
    }

    static bool& inside_task() {
        thread_local bool inside = false;
        return inside;
    }

    template <class Task>
    static void call(void* task, std::size_t index) {
        (*static_cast<Task*>(task))(index);
    }

    static void pause() noexcept {
#if defined(__SSE2__) || defined(_M_X64)
        _mm_pause();
#else
        std::this_thread::yield();
#endif
    }

    bool finished() const noexcept {
        return remaining_.load(std::memory_order_acquire) == 0 && active_.load(std::memory_order_acquire) == 0;
    }

    /// Claims indices until none are left; records the first exception.
    void claim_and_run(const Job& job) {
        for (std::size_t index = next_index_.fetch_add(1, std::memory_order_relaxed); index < job.count;
             index = next_index_.fetch_add(1, std::memory_order_relaxed)) {
            try {
                job.run(job.task, index);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex_);
                if (!error_) error_ = std::current_exception();
            }
            remaining_.fetch_sub(1, std::memory_order_acq_rel);
        }
    }

    void worker_loop(std::size_t id, std::uint64_t seen) {
        inside_task() = true;
        for (;;) {
            // Spin on the generation for a while after the last job, then sleep until it changes.
            const auto deadline = std::chrono::steady_clock::now() + spin_time;
            for (unsigned spins = 0; generation_.load(std::memory_order_acquire) == seen; ++spins) {
                pause();
                if ((spins & 255u) == 255u && std::chrono::steady_clock::now() > deadline) {
                    std::unique_lock<std::mutex> lock(mutex_);
                    wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
                    break;
                }
            }
            Job job;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                seen = generation_.load(std::memory_order_relaxed);
                if (!job_open_ || id + 1 >= job_.count) continue;
                job = job_;
                active_.fetch_add(1, std::memory_order_relaxed);
            }
            claim_and_run(job);
            {
                std::lock_guard<std::mutex> lock(mutex_);
                active_.fetch_sub(1, std::memory_order_release);
            }
            done_.notify_all();
        }
    }

    std::mutex submit_;                       ///< held by the caller for a whole job
    std::size_t started_ = 0;                 ///< workers started so far (ids 0 .. started_ - 1; under submit_)
    std::mutex mutex_;                        ///< guards job_, job_open_, error_ and worker entry/exit
    std::condition_variable wake_;            ///< generation_ changed
    std::condition_variable done_;            ///< a worker left a job
    std::atomic<std::uint64_t> generation_{0};
    Job job_;
    bool job_open_ = false;
    std::exception_ptr error_;
    std::atomic<std::size_t> next_index_{0};
    std::atomic<std::size_t> remaining_{0};  ///< indices not yet finished
    std::atomic<std::size_t> active_{0};     ///< workers inside the current job
};

}  // namespace detail
LOWBIT_END_NAMESPACE
