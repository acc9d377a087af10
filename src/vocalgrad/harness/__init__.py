"""Run vocalgrad's benchmarks inside evaluation harnesses, with vocalgrad's questions, parser
and metrics: inspect-ai tasks (`inspect_tasks`, needs `vocalgrad[inspect]`), lmms-eval tasks
(`export` + `lmms_tasks`, needs `vocalgrad[lmms]`), and lm-evaluation-harness' result layout
(`lm_eval_layout`). Nothing here imports a harness until it is used."""
