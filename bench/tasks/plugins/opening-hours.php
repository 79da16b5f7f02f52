<?php
/**
 * Plugin Name: Opening Hours
 * Description: Shows the shop's opening hours with the [opening_hours] shortcode (a benchmark fixture).
 * Version: 1.2.0
 * Author: Pressloop benchmark
 * License: MIT
 */

add_shortcode('opening_hours', function () {
    return '<p>Mon-Sat 8:00-18:00</p>';
});
