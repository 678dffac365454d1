"""Helpers of the RocketMQ benchmark (bench/rocketmq_bench.py): one module per client measured."""
