#pragma once
// The web page served at / (web/index.html, compiled in by web_page.cmake): one file,
// its style and script inline, nothing loaded from elsewhere.
namespace tfm::serve {

extern const char* const kWebPage;

}  // namespace tfm::serve
