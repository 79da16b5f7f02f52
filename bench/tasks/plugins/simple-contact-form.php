<?php
/**
 * Plugin Name: Simple Contact Form
 * Description: A contact form with the [contact_form] shortcode (a benchmark fixture).
 * Version: 0.9.1
 * Author: Pressloop benchmark
 * License: MIT
 */

add_shortcode('contact_form', function () {
    return '<form><input name="email"><textarea name="message"></textarea></form>';
});
