"""The Python module against the command line and the C++ API it wraps (run by ctest:
PYTHONPATH holds build/python, TFM_BINARY names build/tfm)."""
import gzip
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import tfm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "threads")
MT, LM, BERT, VIT = (os.path.join(FIXTURES, f"{name}.safetensors") for name in ["mt", "lm", "bert", "vit"])
SENTENCES = [line.strip() for line in open(os.path.join(FIXTURES, "mt.de"), encoding="utf-8")][:6]


def cli(*args, stdin=""):
    """What build/tfm prints for `args`."""
    return subprocess.run([os.environ["TFM_BINARY"], *args], input=stdin, capture_output=True, text=True, check=True).stdout


def test_translator_translates_as_the_command_line_does():
    translator = tfm.Translator(MT)
    got = [t.hypotheses[0] for t in translator.translate(SENTENCES, beam=4)]
    assert got == cli("translate", "--model", MT, "--beam", "4", stdin="\n".join(SENTENCES) + "\n").splitlines()
    two = translator.translate(SENTENCES[:1], beam=2, nbest=2)[0]
    assert len(two.hypotheses) == 2 and two.scores[0] >= two.scores[1]
    assert translator.translate(SENTENCES[:1], return_scores=False)[0].scores == []


def test_a_hugging_face_model_ends_where_transformers_ends_it():
    """Unset, max_len_a and max_len_b leave transformers' limit alone (generation_config.json's max_length 40)."""
    directory = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf", "marian_multi_target_tiny")
    cases = json.load(open(os.path.join(directory, "reference.json"), encoding="utf-8"))["cases"]
    translator = tfm.Translator(directory)
    assert [t.hypotheses[0] for t in translator.translate([c["source_text"] for c in cases], beam=1)] == [c["greedy_text"] for c in cases]
    short = translator.translate([cases[2]["source_text"]], beam=1, max_len_a=0, max_len_b=5)[0]
    assert len(short.token_ids[0]) == 4  # and the end symbol, forced at the limit


def test_a_many_to_many_model_translates_between_the_languages_given():
    """NLLB (tests/fixtures/hf/nllb_tiny, transformers 4.39's outputs): the language codes per call."""
    directory = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf", "nllb_tiny")
    reference = json.load(open(os.path.join(directory, "reference.json"), encoding="utf-8"))
    translator = tfm.Translator(directory)
    out = translator.translate([c["source_text"] for c in reference["cases"]], beam=1, src_lang="eng_Latn", tgt_lang="deu_Latn")
    assert [t.hypotheses[0] for t in out] == [c["greedy_text"] for c in reference["cases"]]
    with pytest.raises(RuntimeError, match="give the source's and the target's"):
        translator.translate(["A dog."])


def test_attention_rows_are_distributions_over_the_source():
    t = tfm.Translator(MT).translate(SENTENCES[:2], beam=1, return_attention=True)
    for one in t:
        a = one.attention[0]
        assert a.shape[0] == len(one.token_ids[0]) + 1
        np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-5)


def test_threads_share_a_translator_and_get_what_one_caller_gets():
    translator = tfm.Translator(MT, workers=2)
    want = [t.hypotheses for t in translator.translate(SENTENCES, beam=2)]
    got = [None] * 8

    def work(i):
        got[i] = [t.hypotheses for t in translator.translate(SENTENCES, beam=2)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 8


def test_the_gil_is_released_while_tfm_computes():
    translator = tfm.Translator(MT, workers=1)
    done = threading.Event()
    ticks = 0

    def translate():
        for _ in range(20):
            translator.translate(SENTENCES, beam=4)
        done.set()

    worker = threading.Thread(target=translate)
    worker.start()
    while not done.is_set():  # runs only if the translating thread let go of the GIL
        ticks += 1
        done.wait(0.001)
    worker.join()
    assert ticks > 10


def test_ctrl_c_cancels_the_translation_it_interrupts():
    """The review's C3: the sentences no worker has begun are dropped, so the translator
    is free at once for the next call."""
    translator = tfm.Translator(MT, workers=1)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        translator.translate(SENTENCES * 5000, beam=4)
    started = time.monotonic()
    assert translator.translate(SENTENCES[:1], beam=1)
    assert time.monotonic() - started < 5, "the interrupted request's sentences were still searched"


def test_errors_are_exceptions_with_tfms_message():
    with pytest.raises(RuntimeError, match="/nonexistent.safetensors"):
        tfm.Translator("/nonexistent.safetensors")
    with pytest.raises(RuntimeError, match="device 'tpu' is not one of cpu, cuda"):
        tfm.Translator(MT, device="tpu")
    with pytest.raises(RuntimeError, match="nbest"):
        tfm.Translator(MT).translate(["Hallo"], beam=2, nbest=3)
    with pytest.raises(ValueError, match="beam must be from 1 to 64"):  # the review's C3: 2**40 exhausted the memory
        tfm.Translator(MT).translate(["Hallo"], beam=2**40)
    with pytest.raises(RuntimeError, match="not a language model"):
        tfm.Generator(MT)
    with pytest.raises(RuntimeError, match="threads and workers must be from 0"):
        tfm.Translator(MT, threads=100000)
    with pytest.raises(ValueError, match="NUL byte"):
        tfm.Translator(MT + "\0junk")
    with pytest.raises(RuntimeError, match="sentence 2: invalid UTF-8"):
        tfm.Encoder(BERT).embed(["fine", b"\xff"])
    assert tfm.Translator(pathlib.Path(MT)).translate(SENTENCES[:1])  # os.PathLike paths


def test_generator_continues_as_the_command_line_does_and_streams_the_same_text():
    generator = tfm.Generator(LM)
    text = generator.generate("ROMEO:", max_tokens=40, temperature=0)
    assert "ROMEO:" + text + "\n" == cli("generate", "--model", LM, "--prompt", "ROMEO:", "--max-new-tokens", "40", "--temperature", "0")
    pieces = list(generator.stream("ROMEO:", max_tokens=40, temperature=0))
    assert len(pieces) > 1 and "".join(pieces) == text
    sampled = [generator.generate("A", max_tokens=30, temperature=1.0, top_k=5, seed=s) for s in (1, 1, 2)]
    assert sampled[0] == sampled[1] != sampled[2]
    # Stop strings and penalties, as the command line's --stop and --repetition-penalty give them.
    stop = text[10:13]
    stream = generator.stream("ROMEO:", max_tokens=40, temperature=0, stop=[stop])
    assert "".join(stream) == text[:text.index(stop)] and stream.finish_reason == "stop" and stream.tokens == text.index(stop) + 3
    assert generator.generate("ROMEO:", max_tokens=40, temperature=0, stop=stop) == text[:text.index(stop)]
    penalized = generator.generate("ROMEO:", max_tokens=40, temperature=0, repetition_penalty=1.3, min_p=0.1)
    assert "ROMEO:" + penalized + "\n" == cli("generate", "--model", LM, "--prompt", "ROMEO:", "--max-new-tokens", "40", "--temperature", "0",
                                               "--repetition-penalty", "1.3", "--min-p", "0.1")
    assert penalized != text


def test_a_chat_model_takes_a_conversation_as_transformers_applies_its_template():
    chat_dir = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf", "qwen2_chat_tiny")
    reference = json.load(open(os.path.join(chat_dir, "reference.json"), encoding="utf-8"))
    generator = tfm.Generator(chat_dir)
    assert generator.has_chat_template and not tfm.Generator(LM).has_chat_template
    for case in reference["cases"]:
        prompt = case.get("text", case.get("messages"))
        stream = generator.stream(prompt, max_tokens=reference["max_new_tokens"], temperature=0)
        assert "".join(stream) == case["new_text"]
        assert stream.finish_reason == ("stop" if case["ended"] else "length") and stream.tokens == len(case["greedy_new_ids"])
    with pytest.raises(ValueError, match="a message is a dict"):
        generator.generate([{"role": "user"}])
    with pytest.raises(RuntimeError, match="has no chat template"):
        tfm.Generator(LM).generate([{"role": "user", "content": "Hi"}])


HF = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf")


def openai_messages(messages):
    """transformers' messages as OpenAI sends them: each call's arguments as JSON text."""
    return [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                                 for c in m["tool_calls"]]} if "tool_calls" in m else m for m in messages]


def test_tools_and_tool_turns_reach_the_template_as_transformers_gives_them():
    directory = os.path.join(HF, "qwen25_tools_tiny")
    reference = json.load(open(os.path.join(directory, "reference.json"), encoding="utf-8"))
    generator = tfm.Generator(directory)
    greedy = {"max_tokens": reference["max_new_tokens"], "temperature": 0, "tools": reference["tools"]}
    assert generator.generate(openai_messages(reference["messages"]), **greedy) == reference["new_text"]
    assert generator.generate(reference["messages"], **greedy) == reference["new_text"]  # (arguments as dicts, as transformers takes them)
    message = generator.parse_tool_calls('Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>')
    assert message["content"] == "Sure.\n" and len(message["tool_calls"]) == 1
    call = message["tool_calls"][0]
    assert call["type"] == "function" and call["function"] == {"name": "get_time", "arguments": '{"zone":"UTC"}'} and len(call["id"]) == 9
    assert generator.parse_tool_calls("It is noon.") == {"role": "assistant", "content": "It is noon."}
    caller_dir = os.path.join(HF, "qwen25_tool_caller_tiny")  # a model made to call a tool
    caller = json.load(open(os.path.join(caller_dir, "reference.json"), encoding="utf-8"))
    caller_model = tfm.Generator(caller_dir)
    reply = caller_model.parse_tool_calls(caller_model.generate(caller["messages"], tools=caller["tools"], temperature=0))
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in caller["tool_calls"]]
    assert reply["content"] is None  # (only a call: null content, as tfm serve and OpenAI answer)
    with pytest.raises(ValueError, match="tools go with a conversation"):
        generator.generate("a text", tools=reference["tools"])


def test_a_lora_adapter_is_merged_as_peft_merges_it():
    """The merged weights' greedy continuations (transformers on W + B A alpha / r), and the command line's --lora."""
    base, adapter = os.path.join(HF, "qwen2_chat_tiny"), os.path.join(HF, "qwen2_chat_tiny_lora")
    reference = json.load(open(os.path.join(adapter, "reference.json"), encoding="utf-8"))
    for device in ("cpu", "sim"):  # (on the simulated device, as on a GPU, the adapters are added where the model is)
        generator = tfm.Generator(base, lora=adapter, device=device)
        for case in reference["cases"]:
            prompt = case.get("text", case.get("messages"))
            assert generator.generate(prompt, max_tokens=reference["max_new_tokens"], temperature=0) == case["new_text"]
    text = reference["cases"][1]["text"]
    assert text + reference["cases"][1]["new_text"] + "\n" == cli("generate", "--model", base, "--lora", adapter, "--prompt", text,
                                                                  "--max-new-tokens", str(reference["max_new_tokens"]), "--temperature", "0")
    assert tfm.Generator(base).generate(text, max_tokens=reference["max_new_tokens"], temperature=0) != reference["cases"][1]["new_text"]


def test_a_stream_keeps_its_generator_and_dropping_it_cancels_its_request():
    stream = tfm.Generator(LM).stream("ROMEO:", max_tokens=10**6)  # the generator itself is dropped at once
    assert next(stream)
    started = time.monotonic()
    del stream  # cancels the million tokens, then the generator goes
    assert time.monotonic() - started < 5


def test_encoder_embeds_as_the_command_line_does():
    vectors = tfm.Encoder(BERT).embed(SENTENCES[:3], pool="mean")
    assert vectors.dtype == np.float32 and vectors.shape == (3, 32)
    want = np.array([[float(x) for x in line.split()] for line in cli("embed", "--model", BERT, stdin="\n".join(SENTENCES[:3]) + "\n").splitlines()])
    np.testing.assert_allclose(vectors, want, rtol=1e-5, atol=1e-6)


def test_encoder_classifies_sentences_and_tags_words_as_the_command_line_does():
    hf = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf")
    text = ["A gripping, funny film.", "John Smith lives in London."]
    sst = tfm.Encoder(os.path.join(hf, "bert_sequence_tiny"))
    labels, probabilities = sst.classify(text)
    assert sst.head == "sequence" and probabilities.shape == (2, 3) and set(labels) <= set(sst.labels)
    want = [json.loads(line) for line in cli("classify", "--model", os.path.join(hf, "bert_sequence_tiny"), "--format", "json",
                                             stdin="\n".join(text) + "\n").splitlines()]
    assert labels == [w["label"] for w in want]
    np.testing.assert_allclose(probabilities, [list(w["probabilities"].values()) for w in want], rtol=1e-6)
    tagged = tfm.Encoder(os.path.join(hf, "bert_token_tiny")).tag(text)
    assert [w["word"] for w in tagged[1]["words"]] == ["john", "smith", "lives", "in", "london", "."]
    assert all(e["text"] and e["end_word"] > e["first_word"] for e in tagged[1]["entities"])
    vectors = tfm.Encoder(os.path.join(hf, "bert_sentence_tiny")).embed(text)  # its modules: mean pooling, normalised
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_classifier_labels_images_from_numpy():
    classifier = tfm.Classifier(VIT)
    with gzip.open(os.path.join(FIXTURES, "fashion", "t10k-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)[:50]
    labels, probabilities = classifier.classify(images)
    assert labels.shape == (50,) and probabilities.shape == (50, classifier.classes)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert (labels == probabilities.argmax(axis=1)).all()
    with gzip.open(os.path.join(FIXTURES, "fashion", "t10k-labels-idx1-ubyte.gz")) as f:
        truth = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[:50]
    assert (labels == truth).mean() > 0.5
    assert (classifier.classify(images[:, None])[0] == labels).all()  # [n, 1, 28, 28]
    assert classifier.class_names == []  # trained on MNIST-style files: numbered classes
    # the review's F2: an image file or numpy pixels as classify takes them
    assert (classifier.pixels_of(images[0]) == images[0][None]).all()
    jpeg = classifier.pixels_of(os.path.join(os.path.dirname(__file__), "..", "fixtures", "serve", "fashion0.jpg"))
    assert jpeg.shape == (1, 28, 28) and classifier.classify(jpeg[None])[0][0] == labels[0]
    with pytest.raises(ValueError, match="an image must be uint8 pixels"):
        classifier.pixels_of(np.zeros((28, 28, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"images must be \[n, 28, 28\]"):
        classifier.classify(np.zeros((2, 27, 27), dtype=np.uint8))
    with pytest.raises(ValueError, match="images must be uint8 pixels"):
        classifier.classify(images.astype(np.float32) / 255)


def test_checkpoints_are_dicts_of_numpy_arrays(tmp_path):
    tensors, metadata = tfm.read_checkpoint(MT)
    assert all(a.dtype == np.float32 for a in tensors.values()) and "tfm.config" in metadata
    copy = str(tmp_path / "copy.safetensors")
    tfm.write_checkpoint(copy, tensors, metadata)
    again, _ = tfm.read_checkpoint(copy)
    assert again.keys() == tensors.keys() and all(np.array_equal(again[k], tensors[k]) for k in tensors)
    # the review's U4: a tensor of integers is named with its file, not as "a tensor of dtype i64"
    ints = tmp_path / "ints.safetensors"
    header = b'{"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}}'
    ints.write_bytes(len(header).to_bytes(8, "little") + header + (7).to_bytes(8, "little") * 2)
    with pytest.raises(RuntimeError, match=r"ints.safetensors: tensor 'ids' holds i64 values; read_checkpoint reads floating-point"):
        tfm.read_checkpoint(str(ints))
    os.symlink(os.path.join(FIXTURES, "vocab.model"), tmp_path / "vocab.model")
    want = [t.hypotheses for t in tfm.Translator(MT).translate(SENTENCES[:2])]
    assert [t.hypotheses for t in tfm.Translator(copy).translate(SENTENCES[:2])] == want


def lm_run(tmp_path, steps):
    """(Paths as pathlib.Path, as everywhere in the module: read back as str.)"""
    task = tfm.LanguageModelTask(model='{"layers": 1, "d_model": 32, "heads": 2, "max_len": 16}', batch=4, sample_tokens=0)
    task.data = tfm.TextData(text=pathlib.Path(FIXTURES) / "lm.txt")
    options = tfm.LanguageModelTask.training_defaults()
    options.out_dir, options.max_steps, options.validate_every = tmp_path / "run", steps, 0
    assert options.out_dir == str(tmp_path / "run") and task.data.text == os.path.join(FIXTURES, "lm.txt")
    return options, task


def test_training_from_python_with_the_command_lines_options(tmp_path):
    options, task = lm_run(tmp_path, 20)
    assert options.max_steps == 20 and options.schedule.warmup == 100  # tfm lm train's defaults
    result = tfm.train(options, task, quiet=True)
    assert not result["stopped"] and result["steps"] == 20 and result["score_name"] == "valid_loss"
    assert result["metrics"]["valid_loss"] < 4.5
    assert tfm.Generator(str(tmp_path / "run" / "best.safetensors")).generate("a", max_tokens=5, temperature=0)
    # the review's U4: a run's directory taken is said in Python's settings, not the command line's flags
    with pytest.raises(RuntimeError, match=r"continue it with options.resume \S+last.safetensors, or start a new one there with "
                                           r"options.force = True \(which deletes those files\) or in another options.out_dir$"):
        tfm.train(options, task, quiet=True)
    with pytest.raises(TypeError, match="unknown setting 'stepz'"):
        tfm.TrainingOptions(stepz=3)
    with pytest.raises(TypeError):
        tfm.Schedule(lr=1e-3)  # edited in place only: options.schedule.lr = ...
    options.force, task.model = True, '{"layers": 0}'
    with pytest.raises(RuntimeError, match="layers"):
        tfm.train(options, task, quiet=True)
    options.max_steps = -5
    with pytest.raises(RuntimeError, match=r"max_steps must be at least 0 \(got -5\)"):
        tfm.train(options, task, quiet=True)
    options.max_steps, options.schedule.lr = 1, 1e30
    with pytest.raises(RuntimeError, match=r"options.schedule.lr must be a number from 0 to 1000 \(got 1e\+30\)"):
        tfm.train(options, task, quiet=True)


def test_fine_tuning_a_sentence_classifier_from_python(tmp_path):
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures")
    options = tfm.SentenceClassifierTask.training_defaults()
    options.init_from, options.out_dir, options.epochs, options.validate_every = os.path.join(fixtures, "hf", "bert_mlm_tiny"), str(tmp_path / "run"), 1, 0
    options.schedule.lr = 3e-3
    task = tfm.SentenceClassifierTask(train=os.path.join(fixtures, "classifier", "train.tsv.gz"), valid=os.path.join(fixtures, "classifier", "valid.tsv"))
    result = tfm.train(options, task, quiet=True)
    assert result["score_name"] == "accuracy" and result["metrics"]["accuracy"] > 26.5  # the majority baseline
    labels, probabilities = tfm.Encoder(str(tmp_path / "run" / "best.safetensors")).classify(["A dog runs."])
    assert labels[0] in {"animal", "other", "sport", "vehicle"} and probabilities.shape == (1, 4)


def test_training_logs_to_pythons_stdout_unless_quiet(tmp_path, capsys):
    options, task = lm_run(tmp_path, 3)
    options.log_every = 1
    tfm.train(options, task)
    out = capsys.readouterr().out
    assert "step 3/3 loss" in out and "validation at step 3" in out, out
    options.force = True
    tfm.train(options, task, quiet=True)
    assert capsys.readouterr() == ("", "")


def test_a_task_without_data_says_so(tmp_path):
    options = tfm.LanguageModelTask.training_defaults()
    options.out_dir = str(tmp_path / "run")
    with pytest.raises(RuntimeError, match="the task's data has no training text"):
        tfm.train(options, tfm.LanguageModelTask(), quiet=True)


def test_a_stop_request_ends_training_after_its_step(tmp_path):
    options, task = lm_run(tmp_path, 50)
    stop = tfm.StopSource()
    stop.request()
    result = tfm.train(options, task, stop=stop, quiet=True)
    assert result["stopped"] and result["steps"] == 1
    assert result["metrics"] == {} and result["best_score"] is None
    options.resume = str(tmp_path / "run" / "last.safetensors")
    assert tfm.train(options, task, quiet=True)["steps"] == 50


def test_ctrl_c_stops_training_after_its_step_saved(tmp_path):
    options, task = lm_run(tmp_path, 10**6)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tfm.train(options, task, quiet=True)
    assert time.monotonic() - started < 10
    assert os.path.exists(tmp_path / "run" / "last.safetensors")


def test_classifier_gives_a_vit_bases_features_as_transformers_does():
    """A ViTModel base (tests/fixtures/hf/vit_base_tiny): pooler_output and the final [CLS] state; classify refused."""
    directory = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf", "vit_base_tiny")
    raw = pathlib.Path(directory, "reference.safetensors").read_bytes()  # float32 tensors after a JSON header
    size = int.from_bytes(raw[:8], "little")
    reference = {name: np.frombuffer(raw[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]], np.float32).reshape(t["shape"])
                 for name, t in json.loads(raw[8:8 + size]).items() if name != "__metadata__"}
    base = tfm.Classifier(directory)
    assert not base.has_classifier
    images = np.stack([base.pixels_of(os.path.join(directory, f"image{i}.png")) for i in range(2)])
    assert np.abs(base.embed(images) - reference["pooler_output"]).max() < 1e-4
    assert np.abs(base.embed(images, "cls") - reference["last_hidden_state"][:, 0]).max() < 1e-4
    with pytest.raises(RuntimeError, match="fine-tune one first"):
        base.classify(images)
