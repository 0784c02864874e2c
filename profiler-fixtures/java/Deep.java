// Java CPU work DEPTH Java frames deep, for the bench: the cost of a
// sample with Java frames (compiled, once the JIT has compiled them), on
// THREADS threads (1 if not given). The fixture protocol: a ready line,
// "go" on stdin, SECONDS of work, a result line (loops done), then it
// lingers until stdin closes.
//
// Usage: java Deep SECONDS DEPTH [THREADS]
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Deep {
    static volatile long sink;

    static long spin(long deadline) {
        long loops = 0;
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < 1000; i++) {
                sink += i ^ loops;
            }
            loops++;
        }
        return loops;
    }

    // Not inlined past the JIT's own limits only by being recursive: each
    // level is a frame of its own.
    static long level(int n, long deadline) {
        if (n <= 1) {
            return spin(deadline);
        }
        return level(n - 1, deadline) + 1;
    }

    public static void main(String[] args) throws Exception {
        long nanos = (long) (Double.parseDouble(args[0]) * 1e9);
        int depth = Integer.parseInt(args[1]);
        int threads = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        System.out.println("ready pid=" + ProcessHandle.current().pid());
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        stdin.readLine();
        long deadline = System.nanoTime() + nanos;
        long[] loops = new long[threads];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int slot = t;
            workers[t] = new Thread(() -> loops[slot] = level(depth, deadline), "worker-" + t);
            workers[t].start();
        }
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers[t].join();
            total += loops[t];
        }
        System.out.println("loops=" + total);
        while (stdin.read() >= 0) {
        }
    }
}
